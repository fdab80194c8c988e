"""nerc-production (tcp, StatefulSet) on two real nodes, once for the module: `pulumi up` of the
real engine, the image set to the training image built here (tools/realtier/torchimage.py),
returns once the provider has awaited the StatefulSet, whose pods run on the real nodes as
restricted-v2 admits them (the UID it gives, set in admission: training.provide_platform).

- The stack's `verifyCommand` (kubectl answering as `oc`) runs the fabric check
  (allreduce_check.py through launch-torchrun.sh) on both pods, on gloo: the ranks meet across
  the nodes, all_gather over the pod network and rank 0 prints the table and the verdict.
- The stack's `launchCommand`, exactly as exported, starts torchrun on every pod; the ranks
  rendezvous across the nodes by the pods' DNS names and a small DDP model on gloo steps on
  every rank, its weights kept equal by the allreduce; Ctrl-C on the launch command
  (launch-all.sh's stop path) stops the training on every pod. Started again and its terminal
  gone (the launch command killed with its kubectl children), the training goes on in the pods
  until the stack's `stopCommand` stops it on every pod."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.real.cluster_state import pods_of, read_live, stack_engine
from tests.real.conftest import RealCluster
from tests.real.training import (
    RESTRICTED_UID,
    STACK,
    assert_nothing_trains,
    launch_until_steps,
    provide_platform,
    run_exported,
    training_cluster,
    training_overrides,
    training_render,
    user_env,
)
from tools.realtier.build import Tools
from tools.realtier.images import NodeImages
from tools.realtier.stacks import StackRender

pytestmark = pytest.mark.real

# The fabric check's sweep kept small (two ranks on two shared cores) and a floor any working
# pod network clears: what is shown is the check's path and verdict, not a speed.
VERIFY = ("verify.maxBytes=4M", "verify.iters=5", "verify.expectedBusbwGbps=0.001")
# The fabric check's arguments that only NCCL (GPUs) can honour, and what gloo on CPUs takes
# instead: the transport check reads NCCL's logs (allreduce_check.py validate).
NCCL_ONLY = ((" --backend nccl ", " --backend gloo "), (" --expected-transport socket", ""))


@pytest.fixture(scope="module")
def training_stack(node_images: NodeImages) -> StackRender:
    stack = training_render(node_images, VERIFY)
    if stack is None:
        pytest.skip("training image not built: run `python -m tools.realtier build`")
    return stack


@pytest.fixture(scope="module")
def two_nodes(
    tools: Tools,
    node_images: NodeImages,
    training_stack: StackRender,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealCluster]:
    """The nodes, with every tool of the tier (the engine's too)."""
    tmp_path = tmp_path_factory.mktemp("training-cluster")
    with training_cluster(tools, node_images, training_stack, tmp_path) as cluster:
        yield cluster


@dataclass(frozen=True)
class TrainingPods:
    """The stack's pods, running on the real nodes, and a user's shell to reach them."""

    pods: list[dict[str, Any]]
    env: dict[str, str]


@pytest.fixture(scope="module")
def training_pods(
    two_nodes: RealCluster,
    training_stack: StackRender,
    node_images: NodeImages,
    tmp_path_factory: pytest.TempPathFactory,
) -> TrainingPods:
    """What the platform provides (the namespace, a volume per claim with the training program,
    restricted-v2's UID in admission), then `pulumi up` with the stack's config."""
    kube, stack = two_nodes.kube, training_stack
    tmp_path = tmp_path_factory.mktemp("training-pods")
    provide_platform(two_nodes, stack, tmp_path / "volumes")
    engine = stack_engine(two_nodes, STACK, tmp_path / "engine")
    engine.up(*training_overrides(node_images, VERIFY))
    (statefulset,) = stack.of_kind("StatefulSet")
    pods = pods_of(kube, read_live(kube, statefulset))
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["real-node-0", "real-node-1"]
    assert {p["spec"]["securityContext"].get("runAsUser") for p in pods} == {RESTRICTED_UID}
    assert all(p["status"]["phase"] == "Running" for p in pods), pods
    return TrainingPods(pods, user_env(two_nodes, tmp_path))


def test_the_fabric_check_gives_its_verdict_across_two_real_nodes(
    training_pods: TrainingPods, training_stack: StackRender
) -> None:
    """verifyCommand as exported but for the NCCL-only arguments (no GPU here): launch-all.sh
    runs it on both pods; rank 0 reports the sweep and PASS; every pod exits 0."""
    command = training_stack.run.outputs["verifyCommand"]
    for nccl, gloo in NCCL_ONLY:
        assert nccl in command, command
        command = command.replace(nccl, gloo)
    check = run_exported(command, training_pods.env)
    printed = check.stdout + check.stderr
    assert check.returncode == 0, printed
    header = "# allreduce_check: all_gather backend=gloo world_size=2 dtype=float32 iters=5"
    assert header in check.stdout, printed
    assert "# transport: not checked (no NCCL log)" in check.stdout, printed
    # The sweep's rows up to verify.maxBytes (4 MiB), each size's data check passed, and the
    # verdict.
    rows = re.findall(r"^ +(\d+) .* (ok|BAD)$", check.stdout, re.MULTILINE)
    assert rows and rows[-1][0] == str(4 << 20), printed
    assert {data for _size, data in rows} == {"ok"}, printed
    assert re.search(r"^PASS(: .*)?$", check.stdout, re.MULTILINE), printed


def test_nerc_production_trains_across_two_real_nodes_and_stops(
    training_pods: TrainingPods,
    two_nodes: RealCluster,
    training_stack: StackRender,
    tmp_path: Path,
) -> None:
    """launchCommand as exported: both ranks step with equal weights; Ctrl-C stops them. Then
    again, its terminal gone instead: the training goes on in every pod until stopCommand, as
    exported, stops it there."""
    outputs, env, pods = training_stack.run.outputs, training_pods.env, training_pods.pods
    kubectl = two_nodes.tools.binary("kubectl")
    launch_until_steps(outputs["launchCommand"], env, tmp_path / "launch.out", len(pods))
    assert_nothing_trains(kubectl, pods, env)

    launch_until_steps(outputs["launchCommand"], env, tmp_path / "lost.out", len(pods), lost=True)
    names = [pod["metadata"]["name"] for pod in pods]
    assert answers(run_exported(outputs["statusCommand"], env)) == dict.fromkeys(names, "running")
    stop = run_exported(outputs["stopCommand"], env)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert_nothing_trains(kubectl, pods, env)
    stopped = answers(run_exported(outputs["statusCommand"], env))
    assert stopped == dict.fromkeys(names, "not running")


def answers(status: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """statusCommand's answer per pod, "<pod>: launch-status: running (pid N)" or "... not
    running", after the pods' table."""
    assert status.returncode == 0, status.stdout + status.stderr
    found = re.findall(r"^(\S+): launch-status: (running|not running)", status.stdout, re.MULTILINE)
    return dict(found)
