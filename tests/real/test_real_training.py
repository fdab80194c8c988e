"""nerc-production (tcp, StatefulSet) on two real nodes: its rendered objects, with the image set
to the training image built here (tools/realtier/torchimage.py), are created on the API server as
pulumi-kubernetes creates them (one create call each, in the render's order; not through the
Pulumi engine: tests/real/test_engine.py covers that path) and its pods run on the real nodes,
once for the module.

- The stack's `verifyCommand` (kubectl answering as `oc`) runs the fabric check
  (allreduce_check.py through launch-torchrun.sh) on both pods, on gloo: the ranks meet across
  the nodes, all_gather over the pod network and rank 0 prints the table and the verdict.
- The stack's `launchCommand`, exactly as exported, starts torchrun on every pod; the ranks
  rendezvous across the nodes by the pods' DNS names and a small DDP model on gloo steps on
  every rank, its weights kept equal by the allreduce; Ctrl-C on the launch command
  (launch-all.sh's stop path) stops the training on every pod."""

from __future__ import annotations

import copy
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, stack_context
from tests.real.cluster_state import pods_of, referenced_objects, statefulset_settled
from tests.real.conftest import RealCluster, real_nodes_cluster
from tools.realtier.build import Tools
from tools.realtier.engine import stack_kubeconfig
from tools.realtier.images import NodeImages
from tools.realtier.kube import describe, wait_for
from tools.realtier.realnodes import NodeSpec
from tools.realtier.stacks import StackRender, render
from tools.realtier.torchimage import locate_training_image

pytestmark = pytest.mark.real

STEPS = 5
# The UID OpenShift's restricted-v2 SCC assigns on a fresh project (the first of the namespace's
# openshift.io/sa.scc.uid-range, 1000650000/10000): admission sets it, the stack does not.
RESTRICTED_UID = 1000650000
# Small enough for two nodes on one small host; the GPUs are only advertised (no GPU here).
OVERRIDES = (
    "gpusPerNode=1",
    "pod.cpuRequest=100m",
    "pod.memoryRequest=256Mi",
    "pod.cpuLimit=2",
    "pod.memoryLimit=4Gi",
    "pod.shmSize=256Mi",
    # The fabric check's sweep kept small (two ranks on two shared cores) and a floor any
    # working pod network clears: what is shown is the check's path and verdict, not a speed.
    "verify.maxBytes=4M",
    "verify.iters=5",
    "verify.expectedBusbwGbps=0.001",
)
# The fabric check's arguments that only NCCL (GPUs) can honour, and what gloo on CPUs takes
# instead: the transport check reads NCCL's logs (allreduce_check.py validate).
NCCL_ONLY = ((" --backend nccl ", " --backend gloo "), (" --expected-transport socket", ""))

TRAIN = """\
import datetime, signal, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
torch.manual_seed(1 + rank)  # each rank its own data: equal weights need the allreduce
inputs = torch.randn(64, 8)
targets = inputs.sum(dim=1, keepdim=True)
step = 0
while True:
    step += 1
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    weights = ",".join(f"{w:.6f}" for w in model.module.weight.detach().flatten().tolist())
    print(f"rank {rank}/{world} step {step} weights {weights}", flush=True)
    time.sleep(0.5)
"""
STEP_LINE = re.compile(r"^rank (\d+)/(\d+) step (\d+) weights (\S+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def training_stack(node_images: NodeImages) -> StackRender:
    image = locate_training_image(node_images.test)
    if image is None:
        pytest.skip("training image not built: run `python -m tools.realtier build`")
    return render("nerc-production", (f"image={image.name}", *OVERRIDES))


@pytest.fixture(scope="module")
def training_cluster(
    node_tools: Tools,
    node_images: NodeImages,
    training_stack: StackRender,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealCluster]:
    """Two real nodes labelled and tainted as the stack's GPU nodes, holding the training image."""
    image = locate_training_image(node_images.test)
    assert image is not None
    specs = [
        NodeSpec(
            f"real-node-{i}",
            labels=node.labels,
            taints=tuple(node.taints),
            extended_resources={"nvidia.com/gpu": "8"},
        )
        for i, node in enumerate(training_stack.nodes())
    ]
    tmp_path = tmp_path_factory.mktemp("training-cluster")
    with real_nodes_cluster(node_tools, node_images, tmp_path, specs, (image,)) as cluster:
        yield cluster


@dataclass(frozen=True)
class TrainingPods:
    """The stack's pods, running on the real nodes, and a user's shell to reach them."""

    pods: list[dict[str, Any]]
    env: dict[str, str]


@pytest.fixture(scope="module")
def training_pods(
    training_cluster: RealCluster,
    training_stack: StackRender,
    tmp_path_factory: pytest.TempPathFactory,
) -> TrainingPods:
    kube, stack = training_cluster.kube, training_stack
    tmp_path = tmp_path_factory.mktemp("training-pods")
    kube.create_all(referenced_objects(stack))
    kube.create_all(_claim_volumes(stack, tmp_path / "volumes"))
    kube.create_all(_as_restricted_v2(stack))
    (statefulset,) = stack.of_kind("StatefulSet")
    live = wait_for(
        "the StatefulSet ready on the real nodes",
        lambda: statefulset_settled(kube, statefulset),
        explain=lambda: describe(kube, stack.settings.namespace),
    )
    pods = pods_of(kube, live)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["real-node-0", "real-node-1"]
    return TrainingPods(pods, _user_env(training_cluster, tmp_path))


def _claim_volumes(stack: StackRender, root: Path) -> list[dict[str, Any]]:
    """A writable host directory per claim (both nodes share this host's file system, as the
    stack's RWX NFS claims are shared), bound to it; train.py in the workspace."""
    volumes = []
    for claim in stack.of_kind("PersistentVolumeClaim"):
        meta, spec = claim["metadata"], claim["spec"]
        directory = root / meta["name"]
        directory.mkdir(parents=True)
        directory.chmod(0o777)
        volumes.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"pv-{meta['name']}"},
                "spec": {
                    "accessModes": spec["accessModes"],
                    "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                    "storageClassName": spec.get("storageClassName", ""),
                    "claimRef": {"namespace": meta["namespace"], "name": meta["name"]},
                    "hostPath": {"path": str(directory)},
                },
            }
        )
    (root / "ml-dev-env-workspace" / "train.py").write_text(TRAIN)
    return volumes


def _as_restricted_v2(stack: StackRender) -> list[dict[str, Any]]:
    """The stack's objects, its pods given the UID restricted-v2 admission would give them."""
    objects = copy.deepcopy(stack.objects())
    for statefulset in (o for o in objects if o["kind"] == "StatefulSet"):
        statefulset["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = RESTRICTED_UID
    return objects


def _user_env(cluster: RealCluster, tmp_path: Path) -> dict[str, str]:
    """A user's shell: kubectl on PATH as `kubectl` and `oc`, a kubeconfig whose context is the
    stack's."""
    kubeconfig = stack_kubeconfig(
        cluster.kubeconfig, stack_context("nerc-production"), tmp_path / "user-kubeconfig"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("kubectl", "oc"):
        (bin_dir / name).symlink_to(cluster.tools.binary("kubectl"))
    path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    return {"PATH": path, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}


def _steps(output: Path) -> dict[int, dict[int, str]]:
    """rank -> step -> the weights it printed."""
    seen: dict[int, dict[int, str]] = {}
    for rank, _world, step, weights in STEP_LINE.findall(output.read_text(errors="replace")):
        seen.setdefault(int(rank), {})[int(step)] = weights
    return seen


def test_the_fabric_check_gives_its_verdict_across_two_real_nodes(
    training_pods: TrainingPods, training_stack: StackRender
) -> None:
    """verifyCommand as exported but for the NCCL-only arguments (no GPU here): launch-all.sh
    runs it on both pods; rank 0 reports the sweep and PASS; every pod exits 0."""
    command = training_stack.run.outputs["verifyCommand"]
    for nccl, gloo in NCCL_ONLY:
        assert nccl in command, command
        command = command.replace(nccl, gloo)
    check = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=training_pods.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
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
    training_cluster: RealCluster,
    training_stack: StackRender,
    tmp_path: Path,
) -> None:
    stack, pods, env = training_stack, training_pods.pods, training_pods.env
    output = tmp_path / "launch.out"
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
            seen = _steps(output)
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
    kubectl = [str(training_cluster.tools.binary("kubectl"))]
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
