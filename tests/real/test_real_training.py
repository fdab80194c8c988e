"""nerc-production (tcp, StatefulSet) trains on two real nodes: its rendered objects, with the
image set to the training image built here (tools/realtier/torchimage.py), are created on the
API server as pulumi-kubernetes creates them (one create call each, in the render's order; not
through the Pulumi engine: tests/real/test_engine.py covers that path); its pods run on the real
nodes; the stack's `launchCommand`, exactly as exported (kubectl answering as `oc`), starts
torchrun on every pod; the ranks rendezvous across the nodes by the pods' DNS names and a small
DDP model on gloo steps on every rank, its weights kept equal by the allreduce; Ctrl-C on the
launch command (launch-all.sh's stop path) stops the training on every pod."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.real.cluster_state import pods_of, referenced_objects, statefulset_settled
from tests.real.conftest import RealCluster
from tests.real.training import (
    STEP_LINE,
    as_restricted_v2,
    claim_volumes,
    steps,
    training_cluster,
    training_render,
    user_env,
)
from tools.realtier.build import Tools
from tools.realtier.images import NodeImages
from tools.realtier.kube import describe, wait_for
from tools.realtier.stacks import StackRender

pytestmark = pytest.mark.real

STEPS = 5


@pytest.fixture
def training_stack(node_images: NodeImages) -> StackRender:
    stack = training_render(node_images)
    if stack is None:
        pytest.skip("training image not built: run `python -m tools.realtier build`")
    return stack


@pytest.fixture
def two_nodes(
    node_tools: Tools, node_images: NodeImages, training_stack: StackRender, tmp_path: Path
) -> Iterator[RealCluster]:
    with training_cluster(node_tools, node_images, training_stack, tmp_path) as cluster:
        yield cluster


def test_nerc_production_trains_across_two_real_nodes_and_stops(
    two_nodes: RealCluster, training_stack: StackRender, tmp_path: Path
) -> None:
    kube, stack = two_nodes.kube, training_stack
    kube.create_all(referenced_objects(stack))
    kube.create_all(claim_volumes(stack, tmp_path / "volumes"))
    kube.create_all(as_restricted_v2(stack))
    (statefulset,) = stack.of_kind("StatefulSet")
    live = wait_for(
        "the StatefulSet ready on the real nodes",
        lambda: statefulset_settled(kube, statefulset),
        explain=lambda: describe(kube, stack.settings.namespace),
    )
    pods = pods_of(kube, live)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["real-node-0", "real-node-1"]

    output = tmp_path / "launch.out"
    env = user_env(two_nodes, tmp_path)
    with output.open("wb") as out:
        launch = subprocess.Popen(
            ["bash", "-c", stack.run.outputs["launchCommand"]],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def stepped() -> dict[int, dict[int, str]] | None:
            assert launch.poll() is None, output.read_text(errors="replace")
            seen = steps(output.read_text(errors="replace"))
            return seen if len(seen) == 2 and all(STEPS in s for s in seen.values()) else None

        seen = wait_for(f"step {STEPS} on both ranks", stepped)
        printed = output.read_text(errors="replace")
        assert seen[0][STEPS] == seen[1][STEPS], printed
        assert {world for _rank, world, _step, _weights in STEP_LINE.findall(printed)} == {"2"}

        # Ctrl-C, as a user stops it: launch-all.sh stops the training on every pod.
        os.kill(launch.pid, signal.SIGINT)
        assert launch.wait(timeout=180) == 130, output.read_text(errors="replace")
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
    kubectl = [str(two_nodes.tools.binary("kubectl"))]
    for pod in pods:
        exec_in = [*kubectl, "exec", "-n", pod["metadata"]["namespace"], pod["metadata"]["name"]]
        status = subprocess.run(
            [*exec_in, "-c", "training", "--", "/opt/gpu-cluster/launch-status.sh"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        # launch-status.sh: 3 = no training running.
        assert status.returncode == 3, (pod["metadata"]["name"], status.stdout, status.stderr)
        processes = subprocess.run(
            [*exec_in, "-c", "training", "--", "ps", "-eo", "args"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "train.py" not in processes, processes
