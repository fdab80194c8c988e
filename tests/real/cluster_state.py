"""What the real-tier tests put on a cluster and read back: the platform's prior objects, a
stack's objects, and the settled state the stack must reach."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gpu_cluster.timeline import PHASES
from tests.conftest import ROOT, stack_context
from tools.realtier.engine import PROJECT_DIR, Engine, stack_kubeconfig
from tools.realtier.kube import Kube, describe, wait_for, wait_for_openapi_v2
from tools.realtier.nodes import FakeNode
from tools.realtier.stacks import StackRender, volumes_for

if TYPE_CHECKING:
    from tests.real.conftest import Cluster

Object = dict[str, Any]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def barcelona_before() -> list[Object]:
    """The seed system's objects on Barcelona (fixtures/barcelona_before.yaml)."""
    text = (FIXTURES / "barcelona_before.yaml").read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def referenced_objects(render: StackRender) -> list[Object]:
    """What a stack uses but does not create: its namespace (reference/adopt) and, in rdma mode,
    its NADs (reference/adopt), as the cluster already has them."""
    settings = render.settings
    before = barcelona_before() if render.stack == "barcelona" else []
    prior: list[Object] = []
    if settings.namespace_mode != "create":
        known = [o for o in before if o["kind"] == "Namespace"]
        prior += known or [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": settings.namespace}}
        ]
    rdma = settings.rdma
    uses_nads = settings.platform == "openshift" and settings.network_mode == "rdma"
    if uses_nads and rdma is not None and rdma.network_attachments != "create":
        prior += [o for o in before if o["kind"] == "NetworkAttachmentDefinition"]
    return prior


def provision(kube: Kube, render: StackRender) -> None:
    """The nodes the stack runs on, Ready, and a volume for each of its claims."""
    nodes = render.nodes()
    kube.create_all(n.manifest() for n in nodes)
    for node in nodes:
        wait_for(f"node {node.name} Ready", functools.partial(node_ready, kube, node.name))
    kube.create_all(volumes_for(render.of_kind("PersistentVolumeClaim")))


def node_ready(kube: Kube, name: str) -> bool:
    conditions = kube.get("v1", "Node", name).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def statefulset_settled(kube: Kube, sts: Object) -> Object | None:
    """The StatefulSet once its controller saw the current spec and every replica is Ready at
    the current revision (what pulumi-kubernetes awaits for a StatefulSet from 4.26, which
    checks observedGeneration: pulumi/pulumi-kubernetes#4094; the tier's 4.25 may take the
    status of the spec before, docs/real-tier.md), else None."""
    meta = sts["metadata"]
    live = kube.get("apps/v1", "StatefulSet", meta["name"], meta["namespace"])
    status = live.get("status") or {}
    replicas = live["spec"]["replicas"]
    settled = (
        status.get("observedGeneration", 0) >= live["metadata"]["generation"]
        and status.get("readyReplicas") == replicas
        and status.get("updatedReplicas") == replicas
        and status.get("currentRevision") == status.get("updateRevision")
    )
    return live if settled else None


def daemonset_settled(kube: Kube, ds: Object) -> Object | None:
    """The DaemonSet once its controller saw the current spec and every node that should run
    its pod runs the current one, ready and available (what pulumi-kubernetes awaits for a
    DaemonSet: kstatus' Current, pulumi/pulumi-kubernetes#2953), with at least one node; else
    None."""
    meta = ds["metadata"]
    live = kube.get("apps/v1", "DaemonSet", meta["name"], meta["namespace"])
    status = live.get("status") or {}
    desired = status.get("desiredNumberScheduled", 0)
    counts = ("currentNumberScheduled", "updatedNumberScheduled", "numberAvailable", "numberReady")
    settled = (
        desired > 0
        and status.get("observedGeneration", 0) >= live["metadata"]["generation"]
        and all(status.get(c) == desired for c in counts)
    )
    return live if settled else None


def bring_up(
    cluster: Cluster, stack_render: StackRender, overrides: tuple[str, ...], tmp_path: Path
) -> tuple[Object, list[Object]]:
    """The stack (rendered with `overrides`) on the cluster, its hosts and volumes provisioned,
    settled. An OpenShift stack goes through `pulumi up` of the real engine, which returns once
    the provider has awaited its StatefulSet and DaemonSets. A GKE stack cannot (its Google
    Cloud half needs the Google provider and a cloud: docs/real-tier.md), so its Kubernetes
    objects are created by the client (come_up). Returns them live: the StatefulSet, the
    DaemonSets."""
    if stack_render.settings.platform == "gke":
        provision(cluster.kube, stack_render)
        return come_up(cluster.kube, stack_render)
    engine_for(cluster, stack_render, tmp_path / "engine").up(*overrides)
    return live_workload(cluster.kube, stack_render)


def live_workload(kube: Kube, stack_render: StackRender) -> tuple[Object, list[Object]]:
    """The stack's StatefulSet and DaemonSets as the API server has them now."""
    (sts,) = stack_render.of_kind("StatefulSet")
    return read_live(kube, sts), [read_live(kube, d) for d in stack_render.of_kind("DaemonSet")]


def read_live(kube: Kube, obj: Object) -> Object:
    meta = obj["metadata"]
    return kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))


def come_up(kube: Kube, render: StackRender) -> tuple[Object, list[Object]]:
    """Create what a GKE stack uses but does not create, then its objects (one create call
    each, in the render's order, as pulumi-kubernetes 4.29+ creates them; the engine does not
    run a GKE stack here), and wait until its StatefulSet and every DaemonSet are settled as
    pulumi-kubernetes awaits them. Returns them live: the StatefulSet, the DaemonSets."""
    kube.create_all(referenced_objects(render))
    kube.create_all(render.objects())
    explain = functools.partial(describe, kube, render.settings.namespace)
    (sts,) = render.of_kind("StatefulSet")
    ready = f"{render.stack}: StatefulSet ready"
    live = wait_for(ready, lambda: statefulset_settled(kube, sts), explain=explain)
    daemon_sets = [
        wait_for(
            f"{render.stack}: DaemonSet {ds['metadata']['name']} ready",
            functools.partial(daemonset_settled, kube, ds),
            explain=functools.partial(describe, kube, ds["metadata"]["namespace"]),
        )
        for ds in render.of_kind("DaemonSet")
    ]
    return live, daemon_sets


def pods_of(kube: Kube, workload: Object) -> list[Object]:
    meta = workload["metadata"]
    selector = workload["spec"]["selector"]["matchLabels"]
    labels = ",".join(f"{k}={v}" for k, v in selector.items())
    return kube.list("v1", "Pod", meta["namespace"], label_selector=labels)


def claim_phase(kube: Kube, claim: Object) -> str:
    meta = claim["metadata"]
    live = kube.get("v1", "PersistentVolumeClaim", meta["name"], meta["namespace"])
    return str((live.get("status") or {}).get("phase"))


def paste(
    cluster: Cluster,
    tmp_path: Path,
    context: str,
    command: str,
    user: dict[str, str] | None = None,
) -> str:
    """`command` in bash as a user runs a stack output: from the project directory, with the
    built kubectl on PATH (as `oc` too) and a kubeconfig whose one context is named `context`
    (the name the commands give the stack's cluster), as the admin or with `user`'s credentials
    (a kubeconfig `user` entry, e.g. a token). Returns what it printed."""
    kubeconfig = stack_kubeconfig(cluster.kubeconfig, context, tmp_path / "user-kubeconfig", user)
    # oc is not built here; the commands' `oc get` is kubectl's (oc embeds kubectl's commands),
    # so the built kubectl answers under both names.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("kubectl", "oc"):
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(cluster.tools.binary("kubectl"))
    result = subprocess.run(
        ["bash", "-c", command],
        env={
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "KUBECONFIG": str(kubeconfig),
            "HOME": str(tmp_path),
        },
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, (command, result.stderr)
    return result.stdout


def start_on_record(printed: str) -> list[str]:
    """The phases timelineCommand printed for a start kwok ran, checked: each in PHASES' order,
    each with a time but the sandbox and the image pull (kwok makes no sandbox and pulls no
    image, and sets no condition or event for them), the times in the order a start takes them.
    Returns the phase names."""
    lines = printed.splitlines()
    at = {line[:14].strip(): line[14:36].strip() for line in lines[1:-1]}
    assert list(at) == [p for p in PHASES if p in at], printed
    assert at.pop("sandbox ready") == at.pop("image pulled") == "-", printed
    assert "-" not in at.values(), printed
    steps = ("submitted", "health gate", "admitted", "scheduled", "initialized", "ready")
    order = [at[p] for p in steps if p in at]
    assert order == sorted(order), printed
    return [line[:14].strip() for line in lines[1:-1]]


def stack_engine(
    cluster: Cluster,
    stack: str,
    tmp_path: Path,
    program_dir: Path = PROJECT_DIR,
    stack_file_of: str | None = None,
) -> Engine:
    """The real Pulumi engine for `stack` on the tier's cluster (a kubeconfig context of the
    stack's name), its state under `tmp_path`; `stack_file_of`: the shipped stack whose file
    (and kube context) it starts from, when it is a second stack of the same settings."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    wait_for_openapi_v2(cluster.kube)
    context = stack_context(stack_file_of or stack)
    kubeconfig = stack_kubeconfig(cluster.kubeconfig, context, tmp_path / "kubeconfig")
    return Engine(cluster.tools, tmp_path / "engine", stack, kubeconfig, program_dir, stack_file_of)


def engine_for(
    cluster: Cluster, stack_render: StackRender, tmp_path: Path, program_dir: Path = PROJECT_DIR
) -> Engine:
    """The stack's engine, on a cluster that has the stack's hosts, volumes and what it
    references."""
    provision(cluster.kube, stack_render)
    cluster.kube.create_all(referenced_objects(stack_render))
    return stack_engine(cluster, stack_render.stack, tmp_path, program_dir)


def exists(kube: Kube, obj: Object) -> bool:
    meta = obj["metadata"]
    return kube.exists(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))


def deploy_on(kube: Kube, nodes: Iterable[FakeNode], stack: StackRender) -> None:
    """`nodes`, each waited for until Ready, then what `stack` needs from the platform (its
    claims' volumes, what it references) and its objects."""
    for node in nodes:
        kube.create(node.manifest())
        wait_for(f"node {node.name} Ready", functools.partial(node_ready, kube, node.name))
    kube.create_all(volumes_for(stack.of_kind("PersistentVolumeClaim")))
    kube.create_all(referenced_objects(stack))
    kube.create_all(stack.objects())


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def end_of_deleted(states: list[Object]) -> tuple[dict[str, Any], timedelta]:
    """The container's end as the kubelet last reported it, and how long after the delete
    request it came: the first deletionTimestamp less its grace period (the API server sets it
    to the request's time plus the grace; the kubelet's own delete once the pod has stopped
    moves it to that moment, with no grace)."""
    (status,) = states[-1]["status"]["containerStatuses"]
    terminated: dict[str, Any] = status["state"]["terminated"]
    meta = next(s["metadata"] for s in states if s["metadata"].get("deletionTimestamp"))
    requested = _time(meta["deletionTimestamp"]) - timedelta(
        seconds=meta["deletionGracePeriodSeconds"]
    )
    return terminated, _time(terminated["finishedAt"]) - requested
