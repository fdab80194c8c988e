"""What the real-node training tests and bench/time_to_first_step.py share: nerc-production sized
for two real nodes with the training image (tools/realtier/torchimage.py), the small DDP program
they train, a host directory per claim, and the nodes themselves."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from tests.conftest import ROOT, stack_context
from tests.real.cluster_state import referenced_objects
from tests.real.conftest import RealCluster, real_nodes_cluster
from tests.real.queue_state import run_pods
from tools.realtier.build import Tools
from tools.realtier.controllers import start_controllers
from tools.realtier.engine import stack_kubeconfig
from tools.realtier.images import NodeImages
from tools.realtier.kube import Kube, Object, describe, install_crds, wait_for
from tools.realtier.realnodes import NodeSpec
from tools.realtier.stacks import StackRender, render, volumes_for
from tools.realtier.torchimage import locate_training_image

STACK = "nerc-production"
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
)
# Where the stack's JobSet runs it (workload.command) and launchCommand's default script.
TRAIN_SCRIPT = "/workspace/train.py"

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
# The step every rank reaches before a launch test stops the training (launch_until_steps).
LAUNCH_STEPS = 5
# How long an exported command run to its end may take (a launch that stops at preflight, a
# fabric check, a stop on every pod): minutes at most on these nodes.
EXPORTED_COMMAND_TIMEOUT_S = 300
STEP_LINE = re.compile(r"^rank (\d+)/(\d+) step (\d+) weights (\S+)$", re.MULTILINE)
# TRAIN's first step on rank 0, as launcher.firstStepPattern (a line of pod 0's log).
FIRST_STEP_PATTERN = r"^rank 0/\d+ step 1 "
# The stack as a JobSet queued by Kueue that starts TRAIN by itself.
JOBSET = (
    "workload.kind=jobset",
    f"workload.command[0]={TRAIN_SCRIPT}",
    # Room for a restart (JobSet failurePolicy.maxRestarts).
    "workload.maxRestarts=2",
    f"launcher.firstStepPattern={FIRST_STEP_PATTERN}",
    # The fabric gate's check runs on NCCL, which needs GPUs (none here); gloo is what runs.
    "verify.enabled=false",
)


def training_overrides(images: NodeImages, overrides: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The config that puts nerc-production on the training image, sized for the real nodes;
    () when the image is not built."""
    image = locate_training_image(images.test)
    if image is None:
        return ()
    return (f"image={image.name}", *OVERRIDES, *overrides)


def training_render(
    images: NodeImages, overrides: tuple[str, ...] = (), stack: str = STACK
) -> StackRender | None:
    """`stack` (nerc-production) with training_overrides; None when the image is not built."""
    config = training_overrides(images, overrides)
    return render(stack, config) if config else None


def training_stack_or_skip(
    images: NodeImages, overrides: tuple[str, ...] = (), stack: str = STACK
) -> StackRender:
    """training_render, or the test skipped when the training image is not built."""
    rendered = training_render(images, overrides, stack)
    if rendered is None:
        pytest.skip("training image not built: run `python -m tools.realtier build`")
    return rendered


@contextlib.contextmanager
def training_cluster(
    tools: Tools, images: NodeImages, stack: StackRender, tmp_path: Path, *, queued: bool = False
) -> Iterator[RealCluster]:
    """Two real nodes labelled and tainted as the stack's GPU nodes, holding the training image;
    `queued`: with the upstream CRDs and the Kueue and JobSet managers (controllers.py)."""
    image = locate_training_image(images.test)
    assert image is not None
    specs = [
        NodeSpec(
            f"real-node-{i}",
            labels=node.labels,
            taints=tuple(node.taints),
            extended_resources={"nvidia.com/gpu": "8"},
        )
        for i, node in enumerate(stack.nodes())
    ]
    with real_nodes_cluster(tools, images, tmp_path, specs, (image,)) as cluster:
        if queued:
            install_crds(cluster.kube, tools.crds)
            start_controllers(cluster.plane, cluster.kube, tools)
        yield cluster


def claim_volumes(stack: StackRender, root: Path) -> list[dict[str, Any]]:
    """A writable host directory per claim, below `root` (volumes_for), and TRAIN at
    TRAIN_SCRIPT in each workspace."""
    volumes = volumes_for(stack.of_kind("PersistentVolumeClaim"), root)
    put_in_workspaces(stack, root, Path(TRAIN_SCRIPT).name, TRAIN)
    return volumes


def workspaces(stack: StackRender, root: Path) -> list[Path]:
    """The host directories of the stack's workspace claims below `root` (claim_volumes): one
    shared claim, or one per pod."""
    names = [c["metadata"]["name"] for c in stack.of_kind("PersistentVolumeClaim")]
    return [root / name for name in names if "workspace" in name]


def put_in_workspaces(stack: StackRender, root: Path, name: str, text: str) -> None:
    """`text` as the executable file `name` in every workspace (pods see it in /workspace)."""
    for workspace in workspaces(stack, root):
        (workspace / name).write_text(text)
        (workspace / name).chmod(0o755)


def restricted_v2_admission(namespace: str) -> list[dict[str, Any]]:
    """What gives every pod created in `namespace` the UID restricted-v2 admission gives it on
    OpenShift (the stack sets none; runAsNonRoot alone would refuse the image's root user), so
    the stack's objects go to the API server unchanged, as `pulumi up` sends them."""
    security_context = f"Object.spec.securityContext{{runAsUser: {RESTRICTED_UID}}}"
    return pod_admission(
        "restricted-v2-uid",
        namespace,
        f"Object{{spec: Object.spec{{securityContext: {security_context}}}}}",
    )


def pod_admission(name: str, namespace: str, apply: str) -> list[dict[str, Any]]:
    """A MutatingAdmissionPolicy `name` and its binding that apply the ApplyConfiguration CEL
    expression `apply` to every pod created in `namespace` (what a platform's admission would
    do to it)."""
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ]
                },
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": apply}}
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    ]


def run_exported(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A command the stack exports, run to its end as a user runs it: in bash, from the project
    directory, in the user's shell `env` (user_env); what it printed, captured."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=EXPORTED_COMMAND_TIMEOUT_S,
    )


def user_env(cluster: RealCluster, tmp_path: Path, stack: str = STACK) -> dict[str, str]:
    """A user's shell: kubectl on PATH as `kubectl` and `oc`, a kubeconfig whose context is
    `stack`'s."""
    kubeconfig = stack_kubeconfig(
        cluster.kubeconfig, stack_context(stack), tmp_path / "user-kubeconfig"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("kubectl", "oc"):
        (bin_dir / name).symlink_to(cluster.tools.binary("kubectl"))
    path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    return {"PATH": path, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}


def steps(printed: str) -> dict[int, dict[int, str]]:
    """rank -> step -> the weights it printed."""
    seen: dict[int, dict[int, str]] = {}
    for rank, _world, step, weights in STEP_LINE.findall(printed):
        seen.setdefault(int(rank), {})[int(step)] = weights
    return seen


def provide_platform(cluster: RealCluster, stack: StackRender, volumes: Path) -> None:
    """What the platform gives the stack: what it references (its namespace), restricted-v2's
    UID in admission, and a volume per claim with TRAIN in the workspace."""
    cluster.kube.create_all(referenced_objects(stack))
    cluster.kube.create_all(restricted_v2_admission(stack.settings.namespace))
    cluster.kube.create_all(claim_volumes(stack, volumes))


def submit(cluster: RealCluster, stack: StackRender, volumes: Path) -> None:
    """provide_platform, then the stack's objects, one create call each in the render's order,
    as pulumi-kubernetes creates them."""
    provide_platform(cluster, stack, volumes)
    cluster.kube.create_all(stack.objects())


def jobset_steps(kube: Kube, stack: StackRender) -> dict[int, dict[int, str]]:
    """rank -> step -> weights, from the logs of the JobSet's current pods (a pod whose
    container has not started yet prints nothing)."""
    s = stack.settings
    printed = []
    for pod in run_pods(kube, s.namespace, s.name):
        with contextlib.suppress(ApiException):
            printed.append(kube.pod_log(pod["metadata"]["name"], s.namespace))
    return steps("\n".join(printed))


def stepped_on_every_rank(kube: Kube, stack: StackRender, step: int) -> dict[int, dict[int, str]]:
    """Wait until every rank of the JobSet's current pods printed `step`; rank -> step ->
    weights."""

    def stepped() -> dict[int, dict[int, str]] | None:
        seen = jobset_steps(kube, stack)
        ranks = stack.settings.nodes * stack.settings.gpus_per_node
        return seen if len(seen) == ranks and all(step in s for s in seen.values()) else None

    return wait_for(
        f"step {step} on every rank",
        stepped,
        explain=lambda: describe(kube, stack.settings.namespace),
    )


def kill_worker(cluster: RealCluster, pod: Object, script: str) -> None:
    """SIGKILL the process running `script` in `pod`'s training container (torchrun's worker,
    not torchrun, PID 1, whose command line names the script too), as the kernel's OOM killer
    ends it."""
    in_pod = exec_in(cluster.tools.binary("kubectl"), pod, cluster.kubeconfig)
    workers = [
        pid
        for pid, args in processes_in(in_pod)
        if pid != "1" and script in args and "torchrun" not in args
    ]
    assert workers, processes_in(in_pod)
    subprocess.run([*in_pod, "kill", "-KILL", *workers], check=True)


def processes_in(in_pod: list[str], env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(PID, command line) of every process in the container `in_pod` (exec_in) reaches."""
    listed = subprocess.run(
        [*in_pod, "ps", "-eo", "pid=,args="], env=env, capture_output=True, text=True, check=True
    ).stdout
    return [
        (pid, args)
        for pid, _, args in (line.strip().partition(" ") for line in listed.splitlines())
    ]


@contextlib.contextmanager
def launched(
    command: str, env: dict[str, str], output: Path, ranks: int
) -> Iterator[subprocess.Popen[bytes]]:
    """The exported `command` (launchCommand) running in a session of its own, its output in
    `output`, once every one of `ranks` printed a step (LAUNCH_STEPS or later) with equal
    weights; killed with its oc/kubectl children at the end if it still runs."""
    with output.open("wb") as out:
        launch = subprocess.Popen(
            ["bash", "-c", command],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        assert len(set(stepped_together(launch, output, ranks, LAUNCH_STEPS).values())) == 1
        printed = output.read_text(errors="replace")
        worlds = {world for _rank, world, _step, _weights in STEP_LINE.findall(printed)}
        assert worlds == {str(ranks)}, printed
        yield launch
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)


def stepped_together(
    launch: subprocess.Popen[bytes], output: Path, ranks: int, step: int
) -> dict[int, str]:
    """Wait until each of `ranks` printed the same step, `step` or later, in `output` while
    `launch` runs; rank -> the weights it printed there (two pods' lines share the stream, so a
    line may run into another and go unread)."""

    def stepped() -> dict[int, str] | None:
        assert launch.poll() is None, output.read_text(errors="replace")
        seen = steps(output.read_text(errors="replace"))
        common = set.intersection(*(set(s) for s in seen.values())) if seen else set()
        if len(seen) < ranks or max(common, default=0) < step:
            return None
        return {rank: printed[max(common)] for rank, printed in seen.items()}

    return wait_for(f"step {step} on every rank", stepped)


def interrupt(launch: subprocess.Popen[bytes], output: Path) -> None:
    """Ctrl-C on the launch command, as a user stops it: the launcher stops the training on
    every pod and exits 130."""
    os.kill(launch.pid, signal.SIGINT)
    assert launch.wait(timeout=180) == 130, output.read_text(errors="replace")


def launch_until_steps(
    command: str, env: dict[str, str], output: Path, ranks: int, *, lost: bool = False
) -> str:
    """Run the exported `command` (launchCommand) until every one of `ranks` stepped (launched),
    then interrupt it, or, `lost`, kill it with its oc/kubectl children at once (SIGKILL to its
    process group, as a terminal that closes): that stops nothing in the pods. What it
    printed."""
    with launched(command, env, output, ranks) as launch:
        if lost:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait(timeout=60)
        else:
            interrupt(launch, output)
    return output.read_text(errors="replace")


def exec_in(kubectl: Path, pod: dict[str, Any], kubeconfig: Path | None = None) -> list[str]:
    """`kubectl exec` into `pod`'s training container, up to the command; on `kubeconfig`, else
    the one the environment names."""
    meta = pod["metadata"]
    target = [] if kubeconfig is None else [f"--kubeconfig={kubeconfig}"]
    return [
        str(kubectl),
        *target,
        "exec",
        "-n",
        meta["namespace"],
        meta["name"],
        "-c",
        "training",
        "--",
    ]


def in_training(
    kubectl: Path,
    pod: dict[str, Any],
    env: dict[str, str],
    *command: str,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """`command` in `pod`'s training container (kubectl exec), what it printed captured."""
    return subprocess.run(
        [*exec_in(kubectl, pod), *command],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def launch_status(
    kubectl: Path, pod: dict[str, Any], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """launch-status.sh in `pod`: exit 0 while a training the launchers started runs, 3 not."""
    return in_training(kubectl, pod, env, "/opt/gpu-cluster/launch-status.sh")


def left_running(in_pod: list[str], env: dict[str, str] | None, *words: str) -> list[str]:
    """The command lines of the processes in the container `in_pod` (exec_in) reaches that
    hold any of `words`."""
    return [args for _pid, args in processes_in(in_pod, env) if any(w in args for w in words)]


def assert_nothing_trains(kubectl: Path, pods: list[dict[str, Any]], env: dict[str, str]) -> None:
    """On every pod, launch-status.sh says no training runs (3) and neither a launcher
    (torchrun, DeepSpeed's) nor the training program is left."""
    for pod in pods:
        status = launch_status(kubectl, pod, env)
        assert status.returncode == 3, (pod["metadata"]["name"], status.stdout, status.stderr)
        in_pod = exec_in(kubectl, pod)
        if left_running(in_pod, env, "train.py", "torchrun", "deepspeed"):
            listed = subprocess.run(
                [*in_pod, "ps", "-eo", "pid,ppid,stat,etimes,args"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            pytest.fail(f"training left in {pod['metadata']['name']}:\n{listed.stdout}")
