"""The stack settings -> arguments of the components both platforms share (namespace, storage,
queue, workload). Imports neither platform: each platform imports these (components/select.py
picks the platform)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import pulumi

from gpu_cluster.components.kueue_metrics import KueueMetricsScrape
from gpu_cluster.components.namespace import TrainingNamespaceArgs
from gpu_cluster.components.node_health_gate import NodeHealthGate
from gpu_cluster.components.node_health_runner import NodeHealthRunner
from gpu_cluster.components.queue_controllers import ExistingQueueControllers, QueueControllers
from gpu_cluster.components.run_ledger import RunLedgerExporter
from gpu_cluster.components.stack_config import code_sync_secret
from gpu_cluster.components.training_queue import TrainingQueue
from gpu_cluster.components.training_storage import (
    BucketAccess,
    LustreNetwork,
    TrainingStorage,
    TrainingStorageArgs,
)
from gpu_cluster.components.workload import TrainingWorkload, TrainingWorkloadArgs
from gpu_cluster.components.workload.args import JobSetRun
from gpu_cluster.config.checkpoints import checkpoint_root
from gpu_cluster.config.derived import queue_name
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.workload import needs_namespace_opt_in, required_level
from gpu_cluster.facts.kubernetes import COMPONENT_LABEL, INSTANCE_LABEL
from gpu_cluster.facts.kueue import OPENSHIFT_MANAGED_NAMESPACE_LABEL
from gpu_cluster.plan import launch
from gpu_cluster.plan.claims import retention_annotations
from gpu_cluster.plan.codesync import code_sync
from gpu_cluster.plan.controllers import controller_charts, existing_controllers
from gpu_cluster.plan.data_volumes import data_claims, pod_annotations
from gpu_cluster.plan.health_runner import health_runner_plan
from gpu_cluster.plan.kueue_metrics import kueue_scrape_plan
from gpu_cluster.plan.podspec import ClaimVolume, Mount, PodNetworking, PodPlacement
from gpu_cluster.plan.queue import (
    ADMISSION_GATE,
    admission_gated,
    priority_classes,
    queue_plan,
    run_annotations,
)
from gpu_cluster.plan.run_ledger import run_ledger_plan
from gpu_cluster.plan.run_metrics import (
    RUN_METRICS_MODULES,
    RUN_METRICS_SCRIPT,
    metrics_port,
    metrics_scrape,
    run_metrics_env,
)
from gpu_cluster.plan.runs import ledger_command, runs_command, submit_command
from gpu_cluster.plan.scan_exceptions import training_exceptions
from gpu_cluster.plan.shipped import SCRIPTS_PATH
from gpu_cluster.plan.verify import CHECK_MODULES, CHECK_SCRIPT, FABRIC_GATE, STORAGE_CHECK, gated

# Scripts that run inside the pods (scripts/).
SHIPPED_SCRIPTS = (
    "detect-rdma.sh",
    "launch-common.sh",
    "launch-torchrun.sh",
    "launch-deepspeed.sh",
    "preflight.sh",
    "rdma-sysfs.sh",
    "gdr-path.sh",
    "launch-stop.sh",
    "launch-status.sh",
)


def labels(s: Settings) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "gpu-cluster",
        INSTANCE_LABEL: s.name,
        COMPONENT_LABEL: "training",
    }


def scripts_data(s: Settings) -> dict[str, str]:
    """ConfigMap content: the in-pod scripts plus the files rendered from config."""
    check = [CHECK_SCRIPT, *CHECK_MODULES] if s.verify.enabled else []
    storage = [STORAGE_CHECK] if s.verify.enabled and s.storage.volumes else []
    queued = s.workload.kind == "jobset"
    gates = [ADMISSION_GATE, *([FABRIC_GATE] if s.verify.enabled else [])] if queued else []
    idle = [] if queued else [launch.IDLE_TRAINING]
    metrics = [RUN_METRICS_SCRIPT, *RUN_METRICS_MODULES] if metrics_port(s) is not None else []
    names = [*SHIPPED_SCRIPTS, *check, *storage, *gates, *idle, *metrics]
    data = {name: (SCRIPTS_PATH / name).read_text() for name in names}
    data[launch.HOSTFILE] = launch.hostfile(s)
    data[launch.DEEPSPEED_CONFIG] = json.dumps(launch.deepspeed_config(s), indent=2) + "\n"
    return data


def namespace_args(s: Settings) -> TrainingNamespaceArgs | None:
    """The stack's namespace, unless it is only referenced (namespaceMode: reference)."""
    if s.namespace_mode == "reference":
        return None
    # An adopted or referenced namespace is labelled by its owner (opt_in_warnings); the pods
    # refuse to train unqueued either way.
    opt_in = {OPENSHIFT_MANAGED_NAMESPACE_LABEL: "true"} if needs_namespace_opt_in(s) else {}
    return TrainingNamespaceArgs(
        namespace=s.namespace,
        mode="adopt" if s.namespace_mode == "adopt" else "create",
        labels={**labels(s), **opt_in},
        annotations=retention_annotations(s.storage.retain_on_delete),
        retain_on_delete=s.storage.retain_on_delete,
        # Kubernetes deletes every claim in a deleted namespace, whatever the claims' own
        # `protect`, and an edit that drops the namespace from the program (namespaceMode
        # reference, a platform change) touches no claim. So a namespace that is not retained
        # carries the claims' protection itself. A retained one only leaves the state (the
        # object and its claims stay), so it needs none: protecting it would also stop those
        # harmless edits until storage.protect is lifted.
        protect=s.storage.protect and not s.storage.retain_on_delete,
    )


def job_set_run(s: Settings) -> JobSetRun | None:
    """The JobSet run of a `workload.kind: jobset` stack; None for a StatefulSet."""
    if s.workload.kind != "jobset":
        return None
    return JobSetRun(
        command=admission_gated(gated(s, launch.run_command(s))),
        max_restarts=s.workload.max_restarts,
        restart_strategy=s.workload.restart_strategy,
        queue_name=queue_name(s),
        required_level=required_level(s),
        annotations=run_annotations(s),
        user_command=s.workload.command,
        # A created queue's quota is the stack's nodes (plan.queue.queue_plan).
        max_nodes=s.nodes if s.workload.queue.mode == "create" else None,
        submitters=s.workload.runs.submitters,
        checkpoint_root=checkpoint_root(s),
        priority_classes=tuple(name for name, _ in priority_classes(s)),
    )


def queued(
    name: str,
    s: Settings,
    a: TrainingWorkloadArgs,
    after: Sequence[pulumi.Resource],
    opts: pulumi.ResourceOptions,
) -> TrainingWorkloadArgs:
    """Workload `a` with its queue: a JobSet stack that installs Kueue and JobSet gets
    QueueControllers, one that uses the cluster's ExistingQueueControllers (the check that they
    serve its APIs), and one that creates its queue a TrainingQueue (after the controllers; the
    LocalQueue waiting for `after`, the namespace), with the NodeHealthGate when it has one;
    its JobSet waits for all of them. The flavor's nodes
    are those the pods' placement names by a label. A StatefulSet: `a` as it is."""
    if a.run is None:
        return a
    charts = controller_charts(s)
    controller_labels = {**a.labels, COMPONENT_LABEL: "queue-controllers"}
    existing = existing_controllers(s)
    controllers: tuple[pulumi.Resource, ...] = ()
    if charts:
        installed = QueueControllers(f"{name}-queue-controllers", charts, controller_labels, opts)
        controllers = (installed,)
        scrape = kueue_scrape_plan(s)
        if scrape is not None:
            namespace = installed.namespaces[scrape.release]
            KueueMetricsScrape(f"{name}-kueue-metrics", scrape, controller_labels, namespace, opts)
    elif existing is not None:
        controllers = (ExistingQueueControllers(f"{name}-queue-controllers", existing, opts),)
    a = dataclasses.replace(a, pods_after=(*a.pods_after, *controllers))
    ledger = run_ledger_plan(s)
    if ledger is not None:
        RunLedgerExporter(f"{name}-run-ledger", ledger, a.labels, after, opts)
    node_labels = {
        r.key: r.values[0]
        for r in a.placement.node_requirements
        if r.operator == "In" and len(r.values) == 1
    }
    inits = (*a.networking.init_containers, *a.sidecars)
    plan = queue_plan(s, node_labels, a.networking.resources, inits)
    if plan is None:
        return a
    queue = TrainingQueue(f"{name}-queue", plan, s.namespace, a.labels, after, controllers, opts)
    a = dataclasses.replace(a, pods_after=(*a.pods_after, queue))
    if plan.health_gate is None:
        return a
    gate = NodeHealthGate(f"{name}-node-health-gate", plan.health_gate, a.labels, after, opts)
    awaited = [gate.deployment]
    runner = health_runner_plan(s, a.placement.node_requirements, a.placement.tolerations)
    if runner is not None:
        # The NCCL check's pods are the training pods as placed before the gate's requirements.
        checks = NodeHealthRunner(f"{name}-node-health-runner", runner, a, after, opts)
        awaited.append(checks.deployment)
    # Behind the gate the pods (not the flavor, whose labels are fixed once it has a Topology)
    # ask for nodes whose checks last passed, and wait for the gate's controller and the
    # runner's (not their ingress policies).
    required = (*a.placement.node_requirements, *plan.health_gate.node_requirements())
    return dataclasses.replace(
        a,
        placement=dataclasses.replace(a.placement, node_requirements=required),
        pods_after=(*a.pods_after, *awaited),
    )


def training_storage(
    name: str,
    s: Settings,
    after: Sequence[pulumi.Resource],
    opts: pulumi.ResourceOptions,
    buckets: BucketAccess | None = None,
    lustre: LustreNetwork | None = None,
) -> TrainingStorage | None:
    """The stack's training-data volumes (storage.volumes), their claims waiting for `after`
    (the namespace), with the GKE stack's buckets and Lustre instances; None when it has
    none."""
    if not s.storage.volumes:
        return None
    args = TrainingStorageArgs(
        namespace=s.namespace,
        labels=labels(s),
        claims=data_claims(s),
        retain_on_delete=s.storage.retain_on_delete,
        protect=s.storage.protect,
        buckets=buckets,
        lustre=lustre,
        after=after,
    )
    return TrainingStorage(f"{name}-storage", args, opts)


def run_outputs(s: Settings, workload: TrainingWorkload) -> dict[str, object]:
    """A JobSet stack's `submitCommand` (Pulumi replaces the stack's own run, its JobSet, and
    nothing else), `runsCommand` (the named runs `gpu-cluster run` submits) and, with a step
    pattern to read its steps by, `ledgerCommand` (its own run's status and goodput ledger)."""
    if s.workload.kind != "jobset":
        return {}
    stack = pulumi.get_stack()
    outputs: dict[str, object] = {
        "submitCommand": workload.controller_urn.apply(lambda urn: submit_command(stack, urn)),
        "runsCommand": runs_command(stack),
    }
    if s.launcher.first_step_pattern is not None:
        outputs["ledgerCommand"] = ledger_command(stack, s.name)
    return outputs


def workload_args(
    s: Settings,
    networking: PodNetworking,
    placement: PodPlacement,
    service_account: pulumi.Input[str],
    secret_env: pulumi.Output[dict[str, str]] | None = None,
    claims_after: tuple[pulumi.Resource, ...] = (),
    pods_after: tuple[pulumi.Resource, ...] = (),
) -> TrainingWorkloadArgs:
    """The training workload of stack `s`, with the platform's networking and placement;
    `claims_after`: what the claims wait for (the StorageClass a GKE stack creates);
    `pods_after`: what the pods wait for (TrainingWorkloadArgs.pods_after)."""
    code_sync_source = code_sync_secret(s)
    sidecars = (
        code_sync(s.code_sync, f"{s.name}-code-sync" if code_sync_source is not None else None)
        if s.code_sync is not None
        else None
    )
    keys = tuple(s.secret_env)
    data = data_claims(s)
    return TrainingWorkloadArgs(
        name=s.name,
        namespace=s.namespace,
        labels=labels(s),
        replicas=s.nodes,
        image=s.image,
        gpus_per_node=s.gpus_per_node,
        pod=s.pod,
        storage=s.storage,
        claims_after=claims_after,
        pods_after=pods_after,
        master_port=s.launcher.master_port,
        service_name=launch.service_name(s),
        scripts=scripts_data(s),
        env={**launch.rendezvous_env(s), **run_metrics_env(s)},
        metrics_port=metrics_port(s),
        metrics_scrape=metrics_scrape(s),
        networking=networking,
        placement=placement,
        service_account=service_account,
        start_timeout_minutes=s.workload.start_timeout_minutes,
        sidecars=(sidecars[0],) if sidecars else (),
        sidecar_volumes=(sidecars[1],) if sidecars else (),
        sidecar_mounts=(sidecars[2],) if sidecars else (),
        secret_env_keys=keys if secret_env is not None else (),
        secret_env=secret_env.apply(lambda v: {k: v[k] for k in keys})
        if keys and secret_env is not None
        else None,
        code_sync_source=code_sync_source if s.code_sync is not None else None,
        data_volumes=tuple(ClaimVolume(c.volume, c.claim) for c in data),
        data_mounts=tuple(Mount(c.volume, c.mount_path, c.read_only) for c in data),
        data_annotations=pod_annotations(data),
        scan_exceptions=training_exceptions(s, networking, [sidecars[0]] if sidecars else []),
        run=job_set_run(s),
    )
