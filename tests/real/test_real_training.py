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
  until the stack's `stopCommand` stops it on every pod.

And the in-pod script fixes of issue #39, each in the pods' own containers: a launch whose stream
to one pod is lost stops nothing (launch-all.sh follows that pod's launcher); a stop while a
launcher still checks its node (preflight) ends the launch there; the storage check stopped
mid-write (SIGTERM, as when its pod is deleted) removes its files from the claim; preflight stops
an nvidia-smi that does not answer; a pod that does not answer holds up no other pod's stop, and
the launch gives it up. And a deleted pod's training gets SIGTERM (its grace period to save)
before the pod ends.

Last, the same stack with DeepSpeed as its launcher: it trains across the nodes and its stop
leaves nothing running."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.real.cluster_state import pods_of, read_live, stack_engine, statefulset_settled
from tests.real.conftest import RealCluster, on_one_worker
from tests.real.training import (
    EXPORTED_COMMAND_TIMEOUT_S,
    RESTRICTED_UID,
    STACK,
    TRAIN,
    TRAIN_SCRIPT,
    assert_nothing_trains,
    exec_in,
    in_training,
    interrupt,
    launch_status,
    launch_until_steps,
    launched,
    left_running,
    processes_in,
    provide_platform,
    put_in_workspaces,
    run_exported,
    steps,
    training_cluster,
    training_overrides,
    training_stack_or_skip,
    user_env,
    workspaces,
)
from tools.realtier.build import Tools
from tools.realtier.engine import Engine
from tools.realtier.images import NodeImages
from tools.realtier.kube import wait_for
from tools.realtier.stacks import StackRender

pytestmark = [pytest.mark.real, on_one_worker(__name__)]

# The fabric check's sweep kept small (two ranks on two shared cores) and a floor any working
# pod network clears: what is shown is the check's path and verdict, not a speed. A shared data
# volume, which the storage check measures first (and ships storage_check.py to the pods).
CHECKPOINTS = "/checkpoints"
VERIFY = (
    "verify.maxBytes=4M",
    "verify.iters=5",
    "verify.expectedBusbwGbps=0.001",
    "verify.storageCheckBytes=64M",
    "storage.volumes[0].name=checkpoints",
    f"storage.volumes[0].mountPath={CHECKPOINTS}",
    "storage.volumes[0].sharedClaim.size=10Gi",
)
# The fabric check's arguments that only NCCL (GPUs) can honour, and what gloo on CPUs takes
# instead: the transport check reads NCCL's logs (allreduce_check.py validate).
NCCL_ONLY = ((" --backend nccl ", " --backend gloo "), (" --expected-transport socket", ""))


@pytest.fixture(scope="module")
def training_stack(node_images: NodeImages) -> StackRender:
    return training_stack_or_skip(node_images, VERIFY)


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
    """The stack's pods, running on the real nodes, a user's shell to reach them, and the host
    directory of the claims' volumes."""

    pods: list[dict[str, Any]]
    env: dict[str, str]
    volumes: Path
    engine: Engine


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
    volumes = tmp_path / "volumes"
    provide_platform(two_nodes, stack, volumes)
    engine = stack_engine(two_nodes, STACK, tmp_path / "engine")
    engine.up(*training_overrides(node_images, VERIFY))
    (statefulset,) = stack.of_kind("StatefulSet")
    pods = pods_of(kube, read_live(kube, statefulset))
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["real-node-0", "real-node-1"]
    assert {p["spec"]["securityContext"].get("runAsUser") for p in pods} == {RESTRICTED_UID}
    assert all(p["status"]["phase"] == "Running" for p in pods), pods
    return TrainingPods(pods, user_env(two_nodes, tmp_path), volumes, engine)


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
    # Before it, on every pod, the storage check of the data volume.
    for pod in training_pods.pods:
        measured = rf"^storage {pod['metadata']['name']} {CHECKPOINTS} \(\d+ MB\): save [\d.]+ GB/s"
        assert re.search(measured, check.stdout, re.MULTILINE), printed


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


def test_a_lost_stream_to_one_pod_stops_no_training(
    training_pods: TrainingPods, two_nodes: RealCluster, training_stack: StackRender, tmp_path: Path
) -> None:
    """launchCommand as exported, and its stream to pod 1 lost (its exec client killed, as a
    dropped connection ends it) while both ranks step: launch-all.sh asks the pod whether its
    launcher runs and follows it there; nothing is stopped, and rank 0 steps on, which it can
    only do with rank 1's gradients. Ctrl-C then stops the training on every pod."""
    outputs, env, pods = training_stack.run.outputs, training_pods.env, training_pods.pods
    kubectl = two_nodes.tools.binary("kubectl")
    output = tmp_path / "launch.out"
    pod = pods[1]["metadata"]["name"]
    with launched(outputs["launchCommand"], env, output, len(pods)) as launch:
        os.kill(exec_client(launch.pid, pod), signal.SIGKILL)
        lost = f"launch-all: lost the stream to {pod} (exit {128 + signal.SIGKILL}), but its"

        def printed() -> str:
            text = output.read_text(errors="replace")
            assert launch.poll() is None, text
            return text

        wait_for("launch-all follows the pod", lambda: lost in printed())
        step = max(steps(printed())[0])
        wait_for(f"rank 0 at step {step + 5}", lambda: max(steps(printed())[0]) >= step + 5)
        assert launch_status(kubectl, pods[1], env).returncode == 0
        assert "stopping the training" not in printed()
        interrupt(launch, output)
    assert_nothing_trains(kubectl, pods, env)


def exec_client(group: int, pod: str) -> int:
    """The PID of the exec client in process group `group` that streams the launcher on
    `pod` (launch-all.sh's `CLI exec ... POD ... launch-torchrun.sh`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            words = (entry / "cmdline").read_bytes().decode().split("\0")
        except (ProcessLookupError, FileNotFoundError):
            continue
        if (
            "exec" in words
            and pod in words
            and any(w.endswith("/launch-torchrun.sh") for w in words)
        ):
            found.append(int(entry.name))
    (pid,) = found
    return pid


# A preflight that never answers, as `nvidia-smi -L` when a GPU has fallen off the bus: it says
# it runs in /tmp/checking first.
STUCK_PREFLIGHT = "#!/bin/sh\necho $$ >/tmp/checking\nsleep 600\necho passed\n"


def test_a_stop_while_the_launcher_checks_its_node_ends_the_launch_there(
    training_pods: TrainingPods, two_nodes: RealCluster, training_stack: StackRender
) -> None:
    """The launcher in pod 0 with its preflight stuck: launch-stop.sh (what launch-all.sh runs
    in every pod when one fails or on Ctrl-C) finds the launcher, which ends there (143) with
    its check, and neither the check's command nor the trainer is left."""
    env, pod = training_pods.env, training_pods.pods[0]
    kubectl = two_nodes.tools.binary("kubectl")
    put_in_workspaces(training_stack, training_pods.volumes, "stuck-preflight", STUCK_PREFLIGHT)
    in_pod = exec_in(kubectl, pod)
    launch = subprocess.Popen(
        [
            *in_pod,
            "env",
            "PREFLIGHT=1",
            "PREFLIGHT_BIN=/workspace/stuck-preflight",
            "/opt/gpu-cluster/launch-torchrun.sh",
            "/workspace/train.py",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            "the preflight runs",
            lambda: in_training(kubectl, pod, env, "cat", "/tmp/checking").stdout,
        )
        stop = in_training(kubectl, pod, env, "/opt/gpu-cluster/launch-stop.sh")
        assert stop.returncode == 0, stop.stderr
        assert "launch-stop: stopping training (pid" in stop.stdout, stop.stdout
        out, err = launch.communicate(timeout=120)
    finally:
        launch.kill()
        in_training(kubectl, pod, env, "rm", "-f", "/tmp/checking")
    assert launch.returncode == 143, err
    assert "stopped (SIGTERM) before training started" in err, err
    assert "passed" not in out, out
    left = left_running(in_pod, env, "sleep 600", "torchrun")
    assert not left, left
    assert launch_status(kubectl, pod, env).returncode == 3


def test_the_storage_check_stopped_mid_write_removes_its_files_from_the_claim(
    training_pods: TrainingPods, two_nodes: RealCluster, training_stack: StackRender
) -> None:
    """storage_check.py in pod 0's container, on the data volume's claim, SIGTERM (as the
    kubelet sends it when the pod is deleted) once its files are there: it ends 143 and leaves
    the claim as it was."""
    env, pod = training_pods.env, training_pods.pods[0]
    in_pod = exec_in(two_nodes.tools.binary("kubectl"), pod)
    (claim,) = [
        c
        for c in training_stack.of_kind("PersistentVolumeClaim")
        if "checkpoints" in c["metadata"]["name"]
    ]
    volume = training_pods.volumes / claim["metadata"]["name"]
    before = sorted(p.name for p in volume.iterdir())
    check = subprocess.Popen(
        [*in_pod, "python3", "/opt/gpu-cluster/storage_check.py", "--bytes", "8G", CHECKPOINTS],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def files() -> list[Path] | None:
            assert check.poll() is None, check.communicate()
            return list(volume.glob(".gpu-cluster-storage-check-*")) or None

        wait_for("the check's files", files)
        (pid,) = [pid for pid, args in processes_in(in_pod, env) if "storage_check.py" in args]
        subprocess.run([*in_pod, "kill", "-TERM", pid], env=env, check=True)
        _, err = check.communicate(timeout=120)
    finally:
        check.kill()
    assert check.returncode == 128 + signal.SIGTERM, err
    assert "storage_check: stopped (SIGTERM); its files removed" in err, err
    assert sorted(p.name for p in volume.iterdir()) == before


# An nvidia-smi that never answers, as one waiting on a driver whose GPU fell off the bus.
STUCK_NVIDIA_SMI = "#!/bin/sh\nsleep 600\n"


def test_preflight_stops_an_nvidia_smi_that_does_not_answer(
    training_pods: TrainingPods, two_nodes: RealCluster, training_stack: StackRender
) -> None:
    """preflight.sh in pod 1's container with a stuck nvidia-smi first on PATH: it stops it
    after NVIDIA_SMI_TIMEOUT_SECONDS and fails naming the cause, and no `sleep` is left."""
    env, pod = training_pods.env, training_pods.pods[1]
    put_in_workspaces(training_stack, training_pods.volumes, "nvidia-smi", STUCK_NVIDIA_SMI)
    kubectl = two_nodes.tools.binary("kubectl")
    checked = in_training(
        kubectl,
        pod,
        env,
        "bash",
        "-c",
        "PATH=/workspace:$PATH NVIDIA_SMI_TIMEOUT_SECONDS=2 exec /opt/gpu-cluster/preflight.sh",
        timeout=120,
    )
    assert checked.returncode == 1, checked.stderr
    assert "GPUs: 'nvidia-smi -L' did not answer within 2s (stopped)" in checked.stderr
    left = left_running(exec_in(kubectl, pod), env, "sleep 600")
    assert not left, left


# Room for pod 0's stop (launch-stop.sh's 30 s grace, within which torchrun ends its rank) and
# short of the default 60, so the test waits less for the frozen pod's.
STOP_SECONDS = 45


def test_a_pod_that_does_not_answer_holds_up_no_other_pods_stop(
    training_pods: TrainingPods, two_nodes: RealCluster, training_stack: StackRender, tmp_path: Path
) -> None:
    """launchCommand as exported while both ranks step; then pod 1's processes are frozen (an
    exec into it never answers, as on a node whose kernel or device stalls) and the launch is
    interrupted: launch-all.sh stops pod 0's training, gives up on pod 1's stop after
    LAUNCH_ALL_STOP_SECONDS, closes pod 1's stream, says so and exits 130, leaving no process
    behind. Thawed, stopCommand stops pod 1's training."""
    outputs, pods = training_stack.run.outputs, training_pods.pods
    env = {**training_pods.env, "LAUNCH_ALL_STOP_SECONDS": str(STOP_SECONDS)}
    kubectl = two_nodes.tools.binary("kubectl")
    output = tmp_path / "launch.out"
    pod = pods[1]["metadata"]["name"]
    with (
        launched(outputs["launchCommand"], env, output, len(pods)) as launch,
        two_nodes.nodes.frozen(pods[1]),
    ):
        interrupt(launch, output)
        printed = output.read_text(errors="replace")
        assert (
            f"launch-all: {pod}: '/opt/gpu-cluster/launch-stop.sh' did not end within "
            f"{STOP_SECONDS}s; stopped waiting for it"
        ) in printed
        assert f"launch-all: gave up on {pod}, which does not answer" in printed
        assert not in_session(launch.pid)
        assert launch_status(kubectl, pods[0], env).returncode == 3
    stop = run_exported(outputs["stopCommand"], env)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert_nothing_trains(kubectl, pods, env)


def in_session(session: int) -> list[str]:
    """The command lines of this machine's live processes in `session` (a launch's, its
    kubectl execs included); not zombies, which have ended."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            # Fields 3 and 6 of proc(5): the state and the session ID.
            if fields[0] != "Z" and int(fields[3]) == session:
                found.append((stat.parent / "cmdline").read_text().replace("\0", " "))
        except (OSError, IndexError):  # the process ended meanwhile
            continue
    return found


# TRAIN, but a rank that gets SIGTERM leaves a file named for its pod in the workspace first, as
# a training script saves a checkpoint then.
NOTING_SIGTERM = "/workspace/train_noting_sigterm.py"
TRAIN_NOTING_SIGTERM = TRAIN.replace(
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))",
    "import socket\n"
    "def noted(*_):\n"
    "    open(f'/workspace/sigterm-{socket.gethostname()}', 'w').close()\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, noted)",
)


def test_a_deleted_pods_training_gets_sigterm_before_the_pod_ends(
    training_pods: TrainingPods, two_nodes: RealCluster, training_stack: StackRender, tmp_path: Path
) -> None:
    """launchCommand as exported, with a training script that leaves a file for its pod on
    SIGTERM, while both ranks step; then pod 1 is deleted, as `pulumi up` rolling the
    StatefulSet, a drain or an eviction deletes it. Its container's PID 1 (idle-training.sh)
    stops the training there as launch-stop.sh does, so pod 1's rank gets SIGTERM and leaves
    its file (an idle PID 1 that exits on SIGTERM took the training with it: the kernel
    SIGKILLs a PID namespace's processes when its init exits). The launch ends, and the
    StatefulSet makes pod 1 again. After the module's other tests but the last, which reads the
    pods again: pod 1 is a new pod after it."""
    kube, stack, pods = two_nodes.kube, training_stack, training_pods.pods
    assert TRAIN_NOTING_SIGTERM != TRAIN
    put_in_workspaces(stack, training_pods.volumes, Path(NOTING_SIGTERM).name, TRAIN_NOTING_SIGTERM)
    command = stack.run.outputs["launchCommand"]
    assert command.count(TRAIN_SCRIPT) == 1, command
    deleted = pods[1]["metadata"]["name"]
    output = tmp_path / "launch.out"
    with launched(
        command.replace(TRAIN_SCRIPT, NOTING_SIGTERM), training_pods.env, output, len(pods)
    ) as launch:
        kube.delete("v1", "Pod", deleted, stack.settings.namespace)
        assert launch.wait(timeout=EXPORTED_COMMAND_TIMEOUT_S) != 0
    noted = [w / f"sigterm-{deleted}" for w in workspaces(stack, training_pods.volumes)]
    assert any(n.exists() for n in noted), output.read_text(errors="replace")
    (statefulset,) = stack.of_kind("StatefulSet")
    wait_for("the StatefulSet's pods again", lambda: statefulset_settled(kube, statefulset))


def test_the_stack_with_deepspeed_trains_across_two_real_nodes_and_stops(
    training_pods: TrainingPods, two_nodes: RealCluster, node_images: NodeImages, tmp_path: Path
) -> None:
    """The same stack with `launcher.kind: deepspeed`, by `pulumi up` (the pods roll: the
    hostfile and DeepSpeed's config join the scripts): launchCommand as exported starts
    launch-deepspeed.sh, DeepSpeed's runner with --no_ssh, on every pod; the ranks meet on pod 0
    and step with equal weights. Its terminal gone, the training goes on until stopCommand, as
    exported, stops it on every pod, DeepSpeed's launcher and workers included (they ran on
    before: DeepSpeed's runner dies of SIGTERM and leaves them). After the module's other
    tests: the stack is a DeepSpeed one from here on."""
    kube, deepspeed = two_nodes.kube, (*VERIFY, "launcher.kind=deepspeed")
    stack = training_stack_or_skip(node_images, deepspeed)
    outputs = stack.run.outputs
    assert "/opt/gpu-cluster/launch-deepspeed.sh" in outputs["launchCommand"], outputs
    training_pods.engine.up(*training_overrides(node_images, deepspeed))
    (statefulset,) = stack.of_kind("StatefulSet")
    wait_for("the StatefulSet's pods rolled", lambda: statefulset_settled(kube, statefulset))
    pods = pods_of(kube, read_live(kube, statefulset))
    env = training_pods.env
    printed = launch_until_steps(
        outputs["launchCommand"], env, tmp_path / "launch.out", len(pods), lost=True
    )
    assert "deepspeed.launcher.launch" in printed, printed
    stop = run_exported(outputs["stopCommand"], env)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert_nothing_trains(two_nodes.tools.binary("kubectl"), pods, env)
