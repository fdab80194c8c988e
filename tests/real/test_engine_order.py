"""What `pulumi up` waits for, and what a second one does after it gave up, as the real engine
runs barcelona against the tier (issue #20: nothing on the critical path that need not be).

Only the training pods wait for the image: while the pre-pull DaemonSet cannot run on any GPU
host (each host's CPU held by another pod), every other object of the stack is created, and
only the StatefulSet starts after the DaemonSet is done; read from the engine's own events, in
the order it numbered them. An edge that made another object wait for the pull would show here.

A `pulumi up` that gives up on the training pods (every host's GPUs held, the wait cut to
`workload.startTimeoutMinutes=1`) fails naming the StatefulSet and keeps it in the state; once
the GPUs are free, a second `pulumi up` with nothing changed finishes the same objects: it
creates, replaces and deletes nothing, the StatefulSet and the claims are the objects the first
one made, and the cluster holds nothing the stack does not render.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpu_cluster.components.workload.kind import STATEFUL_SET_TYPE
from tests.real.cluster_state import engine_for, exists, pods_of, statefulset_settled
from tests.real.conftest import Cluster
from tools.realtier.engine import Outcome, Step
from tools.realtier.kube import Kube, describe, wait_for
from tools.realtier.stacks import Object, StackRender, render

pytestmark = pytest.mark.real

STACK = "barcelona"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
HOLDER_NAMESPACE = "default"


@contextlib.contextmanager
def held(kube: Kube, stack_render: StackRender, resource: str) -> Iterator[None]:
    """Every GPU host's whole `resource` taken by a pod of its own (bound to the host, as the
    scheduler counts any pod on a node), so no other pod that asks for some fits there; given
    back on leaving."""
    holders: list[Object] = []
    for node in stack_render.nodes():
        amount = node.allocatable[resource]
        holders.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"holds-{node.name}", "namespace": HOLDER_NAMESPACE},
                "spec": {
                    "nodeName": node.name,
                    "containers": [
                        {
                            "name": "hold",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {
                                "requests": {resource: amount},
                                "limits": {resource: amount},
                            },
                        }
                    ],
                },
            }
        )
    kube.create_all(holders)
    try:
        yield
    finally:
        for pod in holders:
            kube.delete("v1", "Pod", pod["metadata"]["name"], HOLDER_NAMESPACE)


def program_steps(outcome: Outcome, *ops: str) -> list[Step]:
    """The steps of the stack's Kubernetes objects (not the engine's stack and provider, nor the
    program's components)."""
    return [s for s in outcome.ops(*ops) if s.type.startswith("kubernetes:")]


def test_only_the_training_pods_wait_for_the_image_pull(cluster: Cluster, tmp_path: Path) -> None:
    kube = cluster.kube
    # A short wait, so an engine that never gets its DaemonSet ends the test soon.
    edit = "workload.startTimeoutMinutes=3"
    stack_render = render(STACK, (edit,))
    engine = engine_for(cluster, stack_render, tmp_path)
    (sts,) = stack_render.of_kind("StatefulSet")
    (ds,) = stack_render.of_kind("DaemonSet")
    others = [o for o in stack_render.objects() if o is not sts]
    namespace = stack_render.settings.namespace

    def missing() -> str:
        absent = [f"{o['kind']} {o['metadata']['name']}" for o in others if not exists(kube, o)]
        return f"not created: {absent}\n{describe(kube, namespace)}"

    with ThreadPoolExecutor(1) as background:
        with held(kube, stack_render, "cpu"):
            running = background.submit(engine.up, edit)
            wait_for(
                "every object but the StatefulSet, while the pre-pull DaemonSet cannot run",
                lambda: all(exists(kube, o) for o in others),
                explain=missing,
            )
            live = kube.get("apps/v1", "DaemonSet", ds["metadata"]["name"], namespace)
            assert (live.get("status") or {}).get("numberReady", 0) == 0
            assert not exists(kube, sts)
        up = running.result()

    steps = program_steps(up, "create", "read")
    (pull,) = [s for s in steps if s.type == DAEMON_SET]
    assert pull.finished is not None
    after_the_pull = [s.name for s in steps if s.started > pull.finished]
    assert after_the_pull == [s.name for s in steps if s.type == STATEFUL_SET_TYPE]
    # Everything else was done while the pull waited.
    waited_for_the_pull = [
        s.name
        for s in steps
        if s.type != STATEFUL_SET_TYPE and s is not pull and (s.finished or 0) > pull.finished
    ]
    assert waited_for_the_pull == []
    assert statefulset_settled(kube, sts) is not None


def uids(kube: Kube, objects: list[Object]) -> dict[str, str]:
    out = {}
    for o in objects:
        meta = o["metadata"]
        live = kube.get(o["apiVersion"], o["kind"], meta["name"], meta.get("namespace"))
        out[f"{o['kind']} {meta['name']}"] = live["metadata"]["uid"]
    return out


def test_a_second_up_after_a_timeout_finishes_the_job_and_leaks_nothing(
    cluster: Cluster, tmp_path: Path
) -> None:
    kube = cluster.kube
    edit = "workload.startTimeoutMinutes=1"
    stack_render = render(STACK, (edit,))
    engine = engine_for(cluster, stack_render, tmp_path)
    (sts,) = stack_render.of_kind("StatefulSet")
    namespace = stack_render.settings.namespace

    with held(kube, stack_render, "nvidia.com/gpu"):
        gave_up = engine.up(edit, check=False)
        assert gave_up.error is not None
        (failed,) = [s for s in program_steps(gave_up, "create") if s.failed]
        assert failed.type == STATEFUL_SET_TYPE, gave_up.error
        # The provider's words: "'<name>' timed out waiting to be Ready".
        assert f"'{sts['metadata']['name']}' timed out" in gave_up.error
        pending = pods_of(kube, sts)
        assert pending and all(p["status"]["phase"] == "Pending" for p in pending)
    made = uids(kube, stack_render.objects())
    kept = {r["urn"] for r in engine.export()["resources"]}
    assert {r.urn for r in stack_render.run.resources} <= kept

    again = engine.up()
    changed = [(s.op, s.name) for s in program_steps(again) if s.op not in ("same", "update")]
    assert changed == []
    updated = [s.name for s in program_steps(again, "update")]
    assert updated == [failed.name]
    assert uids(kube, stack_render.objects()) == made
    settled = wait_for(
        "the StatefulSet ready",
        lambda: statefulset_settled(kube, sts),
        explain=functools.partial(describe, kube, namespace),
    )
    assert settled["status"]["readyReplicas"] == stack_render.settings.nodes
    # Nothing the stack does not render is left in its namespace.
    for kind, api_version in (
        ("StatefulSet", "apps/v1"),
        ("DaemonSet", "apps/v1"),
        ("ConfigMap", "v1"),
        ("Service", "v1"),
        ("PersistentVolumeClaim", "v1"),
    ):
        rendered = {o["metadata"]["name"] for o in stack_render.of_kind(kind)}
        live_names = {o["metadata"]["name"] for o in kube.list(api_version, kind, namespace)}
        assert live_names - rendered <= {"kube-root-ca.crt", "openshift-service-ca.crt"}, kind
