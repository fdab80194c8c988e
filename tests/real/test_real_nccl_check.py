"""The node health runner's `nccl` check on two real nodes (issue #39): nerc-production as a
JobSet stack behind the node health gate, its runner running the pairwise check alone, through
`pulumi up` of the real engine (the platform's part given as for the other real-node stacks:
training.provide_platform). The gate and the runner run in their Deployments' pods; the runner
pairs the two GPU nodes and starts the check's Job, one pod on each node: the training pods'
image and scripts, `fabric-gate.sh` with nothing after it, torchrun meeting across the nodes on
the pair's rendezvous. The check cannot run there (NCCL needs the GPUs these nodes only
advertise): each pod says so (75, through the gate) and the runner labels both nodes `error`,
tainting neither. Before the gate told the two apart, torchrun's 1 made it a failed pair: both
nodes `fail`, both tainted.

What differs from a cluster: the controllers' image is the training image built here, and their
`imagePullPolicy: Always` is taken as IfNotPresent in admission (Always asks a registry; there is
none here), so the objects reach the API server as the engine sends them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.cluster_state import stack_engine
from tests.real.conftest import RealCluster
from tests.real.health_checks import keys, labels, taints
from tests.real.training import (
    JOBSET,
    STACK,
    pod_admission,
    provide_platform,
    training_cluster,
    training_overrides,
    training_stack_or_skip,
)
from tools.realtier.build import Tools
from tools.realtier.charts import chart_crds
from tools.realtier.images import NodeImages
from tools.realtier.kube import describe, install_crd_objects, install_crds, wait_for
from tools.realtier.stacks import StackRender
from tools.realtier.torchimage import locate_training_image

pytestmark = pytest.mark.real

NODES = ("real-node-0", "real-node-1")


def checked_alone(images: NodeImages) -> tuple[str, ...]:
    """The JobSet stack behind the gate, whose runner runs only the pairwise check; the
    controllers on the training image (the test image and PyTorch: the nodes hold only it)."""
    training_image = locate_training_image(images.test)
    if training_image is None:
        return ()
    return (
        *JOBSET,
        # The gate needs topology-aware placement (it names a run's nodes before admission).
        "workload.queue.topologyLevels[0]=example.com/rack",
        "workload.queue.healthGate.enabled=true",
        "workload.queue.healthGate.checks[0]=nccl",
        "workload.queue.healthGate.runner.enabled=true",
        f"workload.queue.healthGate.image={training_image.name}",
    )


@pytest.fixture
def checked_stack(node_images: NodeImages) -> StackRender:
    return training_stack_or_skip(node_images, checked_alone(node_images))


@pytest.fixture
def gpu_nodes(
    tools: Tools, node_images: NodeImages, checked_stack: StackRender, tmp_path: Path
) -> Iterator[RealCluster]:
    """The stack's two GPU nodes (untainted, as nerc-production's), Kueue's and JobSet's CRDs
    served (no managers: no run starts)."""
    with training_cluster(tools, node_images, checked_stack, tmp_path) as cluster:
        install_crds(cluster.kube, tools.crds)
        install_crd_objects(cluster.kube, chart_crds(tools))
        yield cluster


def if_not_present(namespace: str) -> list[dict[str, Any]]:
    """Every container of a pod created in `namespace` pulls only an image that is not there
    (no registry here)."""
    containers = (
        "object.spec.containers.map(c, "
        'Object.spec.containers{name: c.name, imagePullPolicy: "IfNotPresent"})'
    )
    return pod_admission(
        "pull-if-not-present", namespace, f"Object{{spec: Object.spec{{containers: {containers}}}}}"
    )


def test_a_pair_check_that_cannot_run_leaves_both_nodes_untainted(
    gpu_nodes: RealCluster, checked_stack: StackRender, node_images: NodeImages, tmp_path: Path
) -> None:
    cluster, s = gpu_nodes, checked_stack.settings
    kube = cluster.kube
    provide_platform(cluster, checked_stack, tmp_path / "volumes")
    kube.create_all(if_not_present(s.namespace))
    engine = stack_engine(cluster, STACK, tmp_path / "engine")
    engine.up(*training_overrides(node_images, checked_alone(node_images)))

    result, _time_label, taint = keys("nccl")
    runner = f"{s.name}-node-health-runner"

    def runner_log() -> str:
        pods = [
            p
            for p in kube.list("v1", "Pod", s.namespace)
            if p["metadata"]["name"].startswith(runner)
        ]
        return "".join(kube.pod_log(p["metadata"]["name"], s.namespace) for p in pods)

    def results() -> dict[str, str] | None:
        found = {node: labels(kube, node).get(result) for node in NODES}
        return {n: r for n, r in found.items() if r} if all(found.values()) else None

    found = wait_for(
        "both nodes' nccl results",
        results,
        explain=lambda: describe(kube, s.namespace) + runner_log(),
    )
    assert found == dict.fromkeys(NODES, "error")
    for node in NODES:
        assert all(t["key"] != taint for t in taints(kube, node)), taints(kube, node)
    said = [f"{node}: nccl: error: the check could not run (" for node in NODES]
    wait_for("the runner's lines", lambda: all(line in runner_log() for line in said))
