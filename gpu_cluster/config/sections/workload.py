"""The workload's sections: the StatefulSet or the JobSet that runs the training pods, its
Kueue queue, the node health gate and its runner, the controllers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from gpu_cluster.config.base import Section
from gpu_cluster.config.reads import ReadWhen
from gpu_cluster.config.sections.runs import RunsSettings
from gpu_cluster.config.values import (
    DnsLabel,
    HealthCheck,
    HostName,
    Image,
    JobSetVersion,
    KueueVersion,
    PriorityClassName,
    TopologyLevel,
)
from gpu_cluster.config.workload import installs_controllers
from gpu_cluster.facts.health import DCGM_IMAGE, DCGM_LEVEL, GPU_CHECK
from gpu_cluster.facts.kubernetes import POD_START_MINUTES
from gpu_cluster.facts.kueue import (
    HEALTH_GATE_IMAGE,
    JOBSET_CHART_VERSION,
    KUEUE_CHART_VERSION,
    KUEUE_DEFAULT_PREEMPTION,
    TOPOLOGY_LEVELS_MAX,
    WithinClusterQueuePreemption,
)

if TYPE_CHECKING:  # the predicates get the whole config
    pass


_AWAITED = ReadWhen(
    lambda s: (
        s.workload.kind == "statefulset" or (s.platform == "openshift" and s.openshift.pre_pull)
    ),
    "workload.kind is 'statefulset' or openshift.prePull is true (`pulumi up` awaits no pods "
    "otherwise)",
)


_JOBSET = ReadWhen(lambda s: s.workload.kind == "jobset", "workload.kind is 'jobset'")


_CREATED_QUEUE = ReadWhen(
    lambda s: s.workload.queue.mode == "create", "workload.queue.mode is 'create'"
)
_GATED = ReadWhen(
    lambda s: s.workload.queue.health_gate.enabled, "workload.queue.healthGate.enabled is true"
)


_RUNNING_GPU_CHECK = ReadWhen(
    lambda s: (
        s.workload.queue.health_gate.enabled
        and s.workload.queue.health_gate.runner.enabled
        and GPU_CHECK in s.workload.queue.health_gate.checks
    ),
    "workload.queue.healthGate.runner.enabled is true and healthGate.checks lists gpu",
)


class HealthRunnerSettings(Section):
    """The stack's own health runner: it runs the GPU and NCCL checks on the stack's GPU nodes
    and labels them as cluster-health-scanner does (docs/operations.md, "Node health gate")."""

    enabled: bool = False
    """`true`: a controller in the namespace runs the checks of `checks` it knows on the
    stack's GPU nodes whose last result is older than half of `maxAgeHours` (or missing), when
    their GPUs are free, and labels each node with the result; a failed node is also tainted
    (`aiinfra/<check>-healthcheck=failed:NoSchedule`). `gpu`: DCGM diagnostics on each node.
    `nccl`: the fabric check (`verify`'s thresholds) in pods like the training pods, on two nodes
    at once; a pair that fails is checked again, each node with one that passed, to find the
    bad one. It may patch nodes, and an admission policy the stack creates lets it change
    nothing on a node but those labels and taints. It serves each node's results and each
    pair's measured bus bandwidth as metrics, which the platform's Prometheus scrapes (a
    PodMonitor on OpenShift, a PodMonitoring on GKE) and the stack's dashboard shows.
    `false`: something else (cluster-health-scanner) runs the checks."""
    dcgm_level: Annotated[Literal[1, 2, 3, 4], _RUNNING_GPU_CHECK] = DCGM_LEVEL
    """DCGM diagnostics' run level: 1 seconds, 2 about two minutes, 3 about 15, 4 longer."""
    dcgm_image: Annotated[Image, _RUNNING_GPU_CHECK] = DCGM_IMAGE
    """The image the GPU check runs in: NVIDIA's DCGM image (`nv-hostengine`, `dcgmi`, bash),
    of the host engine's DCGM release."""
    # None: the platform's (dcgm_host_engine_of); "own": nv-hostengine in the check's pod.
    dcgm_host_engine: Annotated[Literal["own"] | HostName | None, _RUNNING_GPU_CHECK] = None
    """The DCGM host engine the GPU check's `dcgmi diag` runs on: a host name or address (port
    5555), or `own`: the check starts one in its pod, unprivileged (some diagnostics need root).
    Unset: on OpenShift `nvidia-dcgm.nvidia-gpu-operator.svc`, the GPU Operator's (ClusterPolicy
    `dcgm.enabled`), whose Service sends each pod to its own node's; on GKE `own`. A check that
    cannot reach it, or that DCGM could not run, leaves the node untainted (docs/operations.md,
    "Node health gate")."""


class HealthGateSettings(Section):
    """The node health gate: a Kueue admission check that admits a run only onto nodes that
    passed health checks recently (docs/operations.md, "Node health gate")."""

    enabled: bool = False
    """`true`: the stack's ClusterQueue gets the admission check, and a small controller in the
    namespace answers it from the nodes' health-check labels; a run placed on a node that lacks
    a pass of every check in `checks` within `maxAgeHours` is held (Kueue tries it again after
    `retrySeconds`). Something must run the checks and label the nodes: the stack's own
    `runner` (the `gpu` and `nccl` checks), or on GKE cluster-health-scanner's health runner.
    Needs node-level placement (a Topology).
    """
    checks: Annotated[tuple[HealthCheck, ...], _GATED, Field(min_length=1)] = ("gpu", "nccl")
    """The checks every node of a run must have passed (cluster-health-scanner's: `gpu` DCGM
    diagnostics, `nccl` pairwise all_gather bandwidth, `neper` NIC throughput)."""
    max_age_hours: Annotated[int, _GATED, Field(ge=1, le=720)] = 24
    """How old a pass may be, 1..720."""
    retry_seconds: Annotated[int, _GATED, Field(ge=10, le=86400)] = 600
    """How long Kueue waits before trying a held run again, 10..86400."""
    image: Annotated[Image, _GATED] = HEALTH_GATE_IMAGE
    """The image the controller's script runs in: any with Python 3.11 or later."""
    runner: Annotated[HealthRunnerSettings, _GATED] = HealthRunnerSettings()
    """Whether the stack runs the `gpu` and `nccl` checks itself."""


class PriorityClassSettings(Section):
    """One Kueue WorkloadPriorityClass a run may ask for (`gpu-cluster run submit --priority`)."""

    name: PriorityClassName
    """The class's name: a WorkloadPriorityClass's (a DNS-1123 subdomain) that is also a run's
    `kueue.x-k8s.io/priority-class` label value (at most 63 characters)."""
    # WorkloadPriorityClass.value is an int32 (kueue v0.19.2 8eab687 apis/kueue/v1beta2/
    # workloadpriorityclass_types.go).
    value: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
    """The priority of a run of this class; higher first. A run without one has 0."""


class QueueSettings(Section):
    """The Kueue queue a JobSet waits in (`workload.kind: jobset`)."""

    # create: the stack creates the queue; reference: the platform team's LocalQueue exists.
    mode: Literal["create", "reference"] = "create"
    """`create`: the stack creates a ClusterQueue whose quota is its `nodes` GPU nodes (one run
    at a time: a second one waits), a ResourceFlavor for its GPU nodes, a Topology when
    placement levels are known (GKE, or `workload.queue.topologyLevels`) and the namespace's
    LocalQueue; cluster-scoped ones are named after `name`. `reference`: the LocalQueue
    `workload.queue.name` exists in the namespace and the stack creates none of them.
    """
    name: DnsLabel | None = None
    """The LocalQueue's name; unset: `name`."""
    topology_levels: Annotated[
        tuple[TopologyLevel, ...] | None,
        _CREATED_QUEUE,
        Field(min_length=1, max_length=TOPOLOGY_LEVELS_MAX - 1),
    ] = None
    """Node labels of the placement levels, broadest first (e.g. `[example.com/rack]`); the
    node (`kubernetes.io/hostname`) is always the last level, added by the stack (a Kueue
    Topology holds at most 16 levels, so at most 15 here). Unset: on GKE Compute Engine's
    block, sub-block and host (cluster-toolkit's `gke-default`), except on a flex-start pool,
    which starts empty; on OpenShift none (no topology-aware placement).
    """
    required_level: TopologyLevel | None = None
    """All pods of a run land in one domain of this level (Kueue's
    `podset-required-topology`); one of the levels. Unset: the block on GKE, the first level of
    `workload.queue.topologyLevels` on OpenShift. With `mode: reference`, a level of the
    referenced queue's Topology.
    """
    health_gate: Annotated[
        HealthGateSettings,
        _CREATED_QUEUE,
    ] = HealthGateSettings()
    """The node health gate on the stack's queue."""
    preemption: Annotated[WithinClusterQueuePreemption, _CREATED_QUEUE] = KUEUE_DEFAULT_PREEMPTION
    """Kueue's `preemption.withinClusterQueue` on the stack's ClusterQueue: whether a run that
    does not fit in the quota evicts admitted runs of the queue. `Never` (Kueue's default): it
    waits. `LowerPriority`: it evicts runs of a lower priority (their pods get SIGTERM and their
    grace period to checkpoint; an evicted run waits to be admitted again).
    `LowerOrNewerEqualPriority`: also runs of its priority submitted after it."""
    priority_classes: tuple[PriorityClassSettings, ...] = ()
    """The priorities a run may ask for (`gpu-cluster run submit --priority NAME`), each a
    `name` and a `value`. With `mode: create` the stack creates them as Kueue
    WorkloadPriorityClasses (cluster-scoped, named as given); with `mode: reference`, classes
    that exist in the cluster. Empty: runs have no priority class (all 0)."""


_INSTALLED = ReadWhen(installs_controllers, "the stack installs Kueue and JobSet")


class ControllerSettings(Section):
    """Kueue and JobSet, the controllers a JobSet stack's runs need in the cluster."""

    install: bool | None = None
    """`true`: the stack installs both from their upstream Helm charts (GKE only), JobSet in
    `jobset-system`, then Kueue in `kueue-system`, each as the chart's defaults set it up, and
    creates the queue once they run. `false`: both already run in the cluster, and the stack
    reads first that they serve its APIs (a queue it references: that it exists). Unset: `true` on
    GKE (the stack's own cluster has neither), `false` on OpenShift (Red Hat's operators install
    them there; docs/operations.md, "Training as a JobSet").
    """
    kueue_version: Annotated[KueueVersion, _INSTALLED] = KUEUE_CHART_VERSION
    """Kueue's chart version (its release, without `v`); 0.15.0 or later."""
    jobset_version: Annotated[JobSetVersion, _INSTALLED] = JOBSET_CHART_VERSION
    """JobSet's chart version (its release, without `v`); 0.10.1 or later."""


class WorkloadSettings(Section):
    """What runs the training pods: a StatefulSet a person starts training in, or a JobSet
    queued by Kueue that starts it by itself."""

    kind: Literal["statefulset", "jobset"] = "statefulset"
    """`statefulset`: idle pods, training started with `launchCommand` (per-pod storage
    possible). `jobset`: one JobSet (JobSet and Kueue must run in the cluster) admitted by
    Kueue, whose pods run the launcher with `workload.command` and restart together on a
    failure; no session needs to stay open. See docs/operations.md, "Training as a JobSet".
    New stacks run `jobset` (`gpu-cluster new` writes it); unset is `statefulset`, the kind of
    stacks written before JobSets, with a warning until the stack states it.
    """
    command: Annotated[tuple[str, ...], _JOBSET] = ()
    """Required with `jobset`: the training script and its arguments, run by the launcher
    (`launcher.kind`) on every pod, e.g. `[/workspace/train.py, --epochs, "3"]`.
    """
    max_restarts: Annotated[int, _JOBSET] = Field(default=0, ge=0, le=1000)
    """How often the JobSet restarts all its pods after one fails (JobSet
    `failurePolicy.maxRestarts`; not torchrun's `launcher.maxRestarts`, which restarts workers
    inside the pods). A launcher's configuration error (exit 78) fails the run at once.
    """
    # InPlaceRestart (JobSet 0.12) is left out: an alpha feature gate, off by default
    # (kubernetes-sigs/jobset v0.12.0 pkg/features/features.go), that needs Jobs whose
    # backoffLimit is the maximum (api/jobset/v1alpha2/jobset_types.go), where these fail at once.
    restart_strategy: Annotated[Literal["Recreate", "BlockingRecreate"], _JOBSET] = "Recreate"
    """How the JobSet restarts its pods after one fails (its `failurePolicy.restartStrategy`,
    JobSet 0.10.1 and later): `Recreate` (JobSet's default) makes each Job again as soon as its
    old pods are gone; `BlockingRecreate` waits until every old pod is gone, so no new rank
    meets an old one at the rendezvous."""
    queue: Annotated[QueueSettings, _JOBSET] = QueueSettings()
    """The Kueue queue."""
    controllers: Annotated[ControllerSettings, _JOBSET] = ControllerSettings()
    """Whether the stack installs Kueue and JobSet, and which releases."""
    runs: Annotated[RunsSettings, _JOBSET] = RunsSettings()
    """Runs submitted from the stack's run template with `gpu-cluster run`."""
    start_timeout_minutes: Annotated[int, _AWAITED] = Field(
        default=POD_START_MINUTES, ge=1, le=24 * 60
    )
    """How long `pulumi up` waits for the StatefulSet's pods (`statefulset`) and the pre-pull
    DaemonSet's (`openshift.prePull`) to run before it fails; a second `pulumi up` carries on
    from there. Each new node first pulls the whole training image: raise it for images that
    take longer.
    """
