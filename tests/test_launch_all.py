"""launch-all.sh (launchCommand, on the user's machine), launch-stop.sh and launch-status.sh
(in the pods), run for real (bash) against a stand-in `oc` that answers as kubectl does."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli import as_pid_1, children, command_line, descendants, running
from tests.prerequisites import unavailable
from tests.test_scripts import SCRIPTS, TORCHRUN, run
from tools.realtier.controlplane import free_port

LAUNCH_ALL = SCRIPTS / "launch-all.sh"
LAUNCH_STOP = SCRIPTS / "launch-stop.sh"
LAUNCH_STATUS = SCRIPTS / "launch-status.sh"
DEEPSPEED = SCRIPTS / "launch-deepspeed.sh"
IDLE_TRAINING = SCRIPTS / "idle-training.sh"
# How long a frozen pod's stream stays open; no other test's process sleeps as long.
FROZEN_SECONDS = 601


@pytest.fixture
def fake_oc(tmp_path: Path) -> Path:
    """`oc TARGET... exec -n NS POD -c training -- CMD...` on pretend pods, answering as kubectl
    does (TARGET must be the flags in the file `target`, `--context ctx` unless a test writes
    others; any other target is refused, as a missing context is; `get pod` answers the pod's
    name). Each launch is logged and touches started-<pod>, then ends as rc-<pod> says:
    - a number (0 if absent): the launcher's exit code, which kubectl exits with;
    - "hang": waits until launch-stop.sh is exec'd on that pod, then exits 143 as a SIGTERMed
      torchrun would; "peer": until it is exec'd on any pod (NCCL fails when a peer stops);
    - "drop": the stream is lost (kubectl's exit 1) while the launcher runs on in the pod for
      the next two launch-status.sh queries;
    - "frozen": never ends, a stop or not (a pod that does not answer: `sleep FROZEN_SECONDS`).
    launch-stop.sh is logged and ends the pod's launcher; with hangs-stop-<pod> it never
    answers. launch-status.sh is logged and answers 0 (running) or 3."""
    oc = tmp_path / "oc"
    oc.write_text(
        "#!/usr/bin/env bash\n"
        f"state={tmp_path}\n"
        'target=""; while [[ $1 == --* ]]; do target+="$1 $2 "; context=$2; shift 2; done\n'
        'expected=$(cat "$state/target" 2>/dev/null || echo "--context ctx ")\n'
        '[[ $target == "$expected" ]] ||\n'
        '  { echo "error: context \\"$context\\" does not exist" >&2; exit 98; }\n'
        'if [[ $1 == get ]]; then echo "get $*" >>"$state/log"; echo "pod/$4"; exit 0; fi\n'
        "[[ $1 == exec && $2 == -n && $5 == -c && $6 == training && $7 == -- ]] || exit 99\n"
        "pod=$4; shift 7\n"
        "remote_exit() {\n"
        '  (($1 == 0)) || echo "command terminated with exit code $1" >&2; exit "$1"\n'
        "}\n"
        "if [[ $1 == /opt/gpu-cluster/launch-stop.sh ]]; then\n"
        '  echo "stop $pod" >>"$state/log"\n'
        "  [[ ! -e $state/hangs-stop-$pod ]] || exec sleep 600\n"
        '  touch "$state/stop-$pod"; rm -f "$state/running-$pod"; exit 0\n'
        "fi\n"
        "if [[ $1 == /opt/gpu-cluster/launch-status.sh ]]; then\n"
        '  echo "status $pod" >>"$state/log"\n'
        "  [[ -e $state/running-$pod ]] || remote_exit 3\n"
        '  left=$(($(cat "$state/running-$pod") - 1))\n'
        '  if ((left > 0)); then echo "$left" >"$state/running-$pod"\n'
        '  else rm "$state/running-$pod"; fi\n'
        "  exit 0\n"
        "fi\n"
        'echo "start $pod $*" >>"$state/log"; touch "$state/started-$pod"\n'
        'rc=$(cat "$state/rc-$pod" 2>/dev/null || echo 0)\n'
        "case $rc in\n"
        "  hang) until [[ -e $state/stop-$pod ]]; do sleep 0.05; done; remote_exit 143 ;;\n"
        '  peer) until compgen -G "$state/stop-*" >/dev/null; do sleep 0.05; done\n'
        "    remote_exit 134 ;;\n"
        '  drop) echo 2 >"$state/running-$pod"\n'
        '    echo "error: lost connection to pod" >&2; exit 1 ;;\n'
        f"  frozen) exec sleep {FROZEN_SECONDS} ;;\n"
        "esac\n"
        'remote_exit "$rc"\n'
    )
    oc.chmod(0o755)
    return oc


def _as_from_a_terminal() -> None:
    """SIGINT and SIGQUIT as a terminal's foreground job has them: a test run started as a
    background job ignores both, and bash cannot trap a signal ignored on entry."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def launch_all(
    oc: Path,
    nodes: int = 3,
    target: tuple[str, ...] = ("--context", "ctx"),
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    argv = [str(oc), *target, "ns", "train", str(nodes)]
    argv += ["/opt/gpu-cluster/launch-torchrun.sh", "t.py"]
    return subprocess.Popen(
        ["bash", str(LAUNCH_ALL), *argv],
        # Asked again each second, not 10: the test waits less, nothing else changes.
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LAUNCH_ALL_POLL_SECONDS": "1",
            **(env or {}),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_from_a_terminal,
    )


def log_lines(oc: Path) -> list[str]:
    """The pods' launches and stops (the look-up before them and status queries aside)."""
    return sorted(line for line in all_calls(oc) if not line.startswith(("get ", "status ")))


def all_calls(oc: Path) -> list[str]:
    log = oc.parent / "log"
    return log.read_text().splitlines() if log.exists() else []


def test_launch_all_starts_every_pod_and_succeeds(fake_oc: Path) -> None:
    proc = launch_all(fake_oc)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert log_lines(fake_oc) == [
        f"start train-{i} /opt/gpu-cluster/launch-torchrun.sh t.py" for i in range(3)
    ]


@pytest.mark.parametrize(
    "target",
    [
        ("--kubeconfig", "/home/u/.kube/barcelona"),
        ("--kubeconfig", "/home/u/.kube/barcelona", "--context", "ctx", "--cluster", "c1"),
    ],
)
def test_launch_all_names_the_stacks_kubeconfig_on_every_call(
    fake_oc: Path, target: tuple[str, ...]
) -> None:
    (fake_oc.parent / "target").write_text(" ".join(target) + " \n")
    proc = launch_all(fake_oc, nodes=2, target=target)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert len(log_lines(fake_oc)) == 2


def test_launch_all_returns_the_failing_pods_code_and_stops_the_others(fake_oc: Path) -> None:
    (fake_oc.parent / "rc-train-0").write_text("hang\n")
    (fake_oc.parent / "rc-train-2").write_text("hang\n")
    (fake_oc.parent / "rc-train-1").write_text("3\n")
    proc = launch_all(fake_oc)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "train-1 failed (exit 3); stopping the training on every pod" in err
    assert "first failure: train-1, exit 3" in err
    assert {f"stop train-{i}" for i in range(3)} <= set(log_lines(fake_oc))


def test_a_lost_stream_is_followed_in_the_pod_and_stops_no_training(fake_oc: Path) -> None:
    """kubectl exits 1 for a dropped stream as for a launcher's own exit 1: the pod says its
    launcher runs on, so nothing is stopped, and launch-all waits until it has ended there."""
    (fake_oc.parent / "rc-train-1").write_text("drop\n")
    proc = launch_all(fake_oc)
    _, err = proc.communicate(timeout=60)
    assert "lost the stream to train-1 (exit 1), but its training runs on" in err
    assert not any(line.startswith("stop ") for line in log_lines(fake_oc)), err
    # Asked until its launcher had ended (two answers "running", then "not running").
    assert all_calls(fake_oc).count("status train-1") == 3
    assert "train-1's training has ended; its exit code is unknown" in err
    assert proc.returncode == 1
    assert "no pod failed, but the exit code of train-1 is unknown" in err


def test_a_stop_that_never_answers_holds_up_no_other(fake_oc: Path) -> None:
    """The stop on train-0 hangs (its exec stream never ends); the others are stopped all the
    same, and train-0's training ends as its peers stop (NCCL fails)."""
    (fake_oc.parent / "rc-train-0").write_text("peer\n")
    (fake_oc.parent / "hangs-stop-train-0").touch()
    (fake_oc.parent / "rc-train-1").write_text("hang\n")
    (fake_oc.parent / "rc-train-2").write_text("3\n")
    proc = launch_all(fake_oc, env={"LAUNCH_ALL_STOP_SECONDS": "2"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "train-0: '/opt/gpu-cluster/launch-stop.sh' did not end within 2s" in err
    assert {"stop train-1", "stop train-2"} <= set(log_lines(fake_oc))


def interrupt_once_started(proc: subprocess.Popen[str], oc: Path, nodes: int) -> None:
    """Ctrl-C once every pod's launch has started (readiness, not timing)."""
    started = [oc.parent / f"started-train-{i}" for i in range(nodes)]
    for _ in range(1200):
        if all(p.exists() for p in started):
            break
        subprocess.run(["sleep", "0.05"], check=True)
    proc.send_signal(signal.SIGINT)


def test_launch_all_on_ctrl_c_stops_the_remote_training(fake_oc: Path) -> None:
    for i in range(2):
        (fake_oc.parent / f"rc-train-{i}").write_text("hang\n")
    proc = launch_all(fake_oc, nodes=2)
    interrupt_once_started(proc, fake_oc, nodes=2)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; stopping the training on every pod" in err
    assert {"stop train-0", "stop train-1"} <= set(log_lines(fake_oc))


def test_ctrl_c_gives_up_a_pod_that_does_not_answer_and_closes_its_stream(
    fake_oc: Path,
) -> None:
    """train-0 does not answer (its stream stays open, its stop never ends): Ctrl-C stops
    train-1, gives up on train-0 after LAUNCH_ALL_STOP_SECONDS, closes its stream and exits
    130 saying so, instead of waiting for a stream that may never end."""
    (fake_oc.parent / "rc-train-0").write_text("frozen\n")
    (fake_oc.parent / "hangs-stop-train-0").touch()
    (fake_oc.parent / "rc-train-1").write_text("hang\n")
    proc = launch_all(fake_oc, nodes=2, env={"LAUNCH_ALL_STOP_SECONDS": "2"})
    interrupt_once_started(proc, fake_oc, nodes=2)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "train-0: '/opt/gpu-cluster/launch-stop.sh' did not end within 2s" in err
    assert "gave up on train-0, which does not answer: its training may still run" in err
    assert "stop train-1" in log_lines(fake_oc)
    frozen = ["sleep", str(FROZEN_SECONDS)]
    assert not [p for p in Path("/proc").glob("[0-9]*") if command_line(p.name) == frozen]


def test_launch_all_without_its_cli_or_cluster_says_so_once_and_starts_nothing(
    fake_oc: Path,
) -> None:
    """No pod is reported failed, and no training stopped, for what is wrong on this side."""
    bare = {"PATH": "/usr/bin:/bin"}
    argv = ("oc-not-installed", "--context", "ctx", "ns", "train", "2", "/x", "t")
    missing = run(LAUNCH_ALL, bare, *argv)
    assert missing.returncode == 127
    assert missing.stderr == (
        "launch-all: oc-not-installed is not installed or not on PATH; nothing was started\n"
    )
    unknown = run(LAUNCH_ALL, {}, str(fake_oc), "--context", "gone", "ns", "train", "2", "/x", "t")
    assert unknown.returncode == 98
    assert unknown.stderr == (
        "launch-all: cannot reach pod train-0 in namespace ns (--context gone): error: context "
        '"gone" does not exist; nothing was started. Check that context; on GKE run the command '
        "`pulumi stack output getCredentialsCommand` prints\n"
    )
    assert log_lines(fake_oc) == []


def test_launch_all_usage(fake_oc: Path) -> None:
    result = run(LAUNCH_ALL, {}, str(fake_oc), "--context", "ctx", "ns", "train", "0", "/x", "t")
    assert result.returncode == 2 and "NODES='0'" in result.stderr
    assert run(LAUNCH_ALL, {}, "oc").returncode == 2
    # No command to run.
    result = run(LAUNCH_ALL, {}, str(fake_oc), "--context", "ctx", "ns", "train", "1")
    assert result.returncode == 2 and "usage" in result.stderr
    # No context or kubeconfig file, an empty one, or a cluster alone: refused, never the
    # current context.
    for target in ([], ["--context", ""], ["--kubeconfig", ""], ["--cluster", "c1"]):
        result = run(LAUNCH_ALL, {}, str(fake_oc), *target, "ns", "train", "1", "/x", "t")
        assert result.returncode == 2 and "usage" in result.stderr
    assert log_lines(fake_oc) == []


def test_launch_stop_terms_the_recorded_launcher(tmp_path: Path) -> None:
    # A stand-in trainer that, like torchrun, exits on SIGTERM; the launcher recorded its PID.
    trainer = subprocess.Popen(
        ["bash", "-c", "trap 'exit 143' TERM; echo ready; while :; do sleep 0.05; done"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert trainer.stdout is not None and trainer.stdout.readline() == "ready\n"
    pid_file = tmp_path / "launch.pid"
    pid_file.write_text(f"{trainer.pid} {_start_time(trainer.pid)}\n")
    result = run(LAUNCH_STOP, {"LAUNCH_PID_FILE": str(pid_file)})
    assert result.returncode == 0, result.stderr
    assert f"stopping training (pid {trainer.pid})" in result.stdout
    assert trainer.wait(timeout=60) == 143


def _start_time(pid: int) -> str:
    """Field 22 of /proc/<pid>/stat (proc(5)), as the launchers record it."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]


# A worker that saves for a while on SIGTERM, as a training saving a checkpoint does: it says
# when its save starts and when it is done, beside itself.
SAVING_WORKER = """\
import os, pathlib, signal, sys, time
here = pathlib.Path(__file__).parent
def save(*_):
    (here / "saving").touch()
    time.sleep(2)
    (here / "saved").touch()
    sys.exit(143)
signal.signal(signal.SIGTERM, save)
(here / "worker.pid").write_text(str(os.getpid()))
while True:
    time.sleep(0.1)
"""


@pytest.fixture
def deepspeed_env(tmp_path: Path) -> dict[str, str]:
    """What launch-deepspeed.sh reads to start DeepSpeed for real (the one installed beside these
    tests) on one node of one worker, SAVING_WORKER, written in tmp_path."""
    deepspeed = shutil.which("deepspeed", path=str(Path(sys.executable).parent))
    if deepspeed is None:
        unavailable("no DeepSpeed in this environment (.ci/run installs it)")
    (tmp_path / "worker.py").write_text(SAVING_WORKER)
    (tmp_path / "hostfile").write_text("localhost slots=1\n")
    (tmp_path / "ds_config.json").write_text('{"train_batch_size": 1}\n')
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "NNODES": "1",
        "GPUS_PER_NODE": "1",
        "NODE_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "DEEPSPEED_BIN": deepspeed,
        "DEEPSPEED_HOSTFILE": str(tmp_path / "hostfile"),
        "DEEPSPEED_CONFIG": str(tmp_path / "ds_config.json"),
        "LAUNCH_PID_FILE": str(tmp_path / "launch.pid"),
        "NCCL_ENV_FILE": str(tmp_path / "absent.env"),
    }


@contextlib.contextmanager
def deepspeed_training(
    env: dict[str, str], where: Path, prefix: tuple[str, ...] = ()
) -> Iterator[subprocess.Popen[bytes]]:
    """launch-deepspeed.sh SAVING_WORKER (under `prefix`), once its worker runs; its output in
    `where`/launch.out. Killed with all it started at the end."""
    printed = where / "launch.out"
    with printed.open("wb") as out:
        launcher = subprocess.Popen(
            [*prefix, "bash", str(DEEPSPEED), str(where / "worker.py")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _until((where / "worker.pid").exists, launcher, printed)
        yield launcher
    finally:
        _end(launcher)


def test_a_deepspeed_training_is_stopped_and_waited_for(
    deepspeed_env: dict[str, str], tmp_path: Path
) -> None:
    """launch-deepspeed.sh and DeepSpeed for real (its --no_ssh runner, its launcher, a worker
    that saves on SIGTERM): launch-stop.sh returns once the worker has saved and ended, nothing
    of the training left. DeepSpeed's runner dies of SIGTERM (it has no handler) and its
    launcher ran on: the stop used to return at once, the worker never told."""
    with deepspeed_training(deepspeed_env, tmp_path) as launcher:
        training = [launcher.pid, *map(int, descendants(launcher.pid))]
        stop = run(LAUNCH_STOP, deepspeed_env)
        assert stop.returncode == 0, stop.stderr
        assert (tmp_path / "saved").exists(), (tmp_path / "launch.out").read_text()
        assert not [pid for pid in training if running(pid)], stop.stdout


def test_a_deepspeed_launch_as_pid_1_stops_its_workers_on_sigterm(
    deepspeed_env: dict[str, str], tmp_path: Path
) -> None:
    """launch-deepspeed.sh as its container's PID 1 (a JobSet pod's, through fabric-gate.sh),
    DeepSpeed for real; SIGTERM from outside the namespace, as the kubelet sends it: the worker
    saves, and the launch ends with DeepSpeed's code for a stop. (The runner, PID 1 with no
    handler, never got the signal: the kernel drops it.)"""
    with deepspeed_training(deepspeed_env, tmp_path, as_pid_1()) as launcher:
        (init,) = children(launcher.pid)  # PID 1 inside
        os.kill(int(init), signal.SIGTERM)
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("no end 60 s after SIGTERM: " + (tmp_path / "launch.out").read_text())
        assert (tmp_path / "saved").exists(), (tmp_path / "launch.out").read_text()
        assert launcher.returncode not in (0, -signal.SIGKILL), launcher.returncode


def test_a_stop_while_torchrun_shuts_down_after_a_lost_node_waits_for_its_worker(
    tmp_path: Path,
) -> None:
    """launch-torchrun.sh and torchrun for real on two nodes (processes here), one worker each
    that saves on SIGTERM. Node 0, the rendezvous store's host, is killed: node 1's torchrun
    loses the store, shuts down and tells its worker to stop. launch-stop.sh on node 1 then
    (launch-all.sh stops every pod when one fails): its SIGTERM ends torchrun at once, but the
    stop returns only once the worker has saved and ended. (It used to return with torchrun,
    the worker still running.)"""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TORCHELASTIC_")},
        "OMP_NUM_THREADS": "1",
        "NNODES": "2",
        "GPUS_PER_NODE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHRUN_BIN": str(Path(sys.executable).parent / "torchrun"),
        "NCCL_ENV_FILE": str(tmp_path / "absent.env"),
    }
    nodes = [tmp_path / f"node-{i}" for i in range(2)]
    launchers: list[subprocess.Popen[bytes]] = []
    # Each node's processes: torchrun starts its workers in sessions of their own.
    trees: list[list[int]] = []
    try:
        for node in nodes:
            node.mkdir()
            (node / "worker.py").write_text(SAVING_WORKER)
            with (node / "launch.out").open("wb") as out:
                launchers.append(
                    subprocess.Popen(
                        ["bash", str(TORCHRUN), str(node / "worker.py")],
                        env={**env, "LAUNCH_PID_FILE": str(node / "launch.pid")},
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            if node == nodes[0]:  # the store's host: the first to listen on the port
                _until(lambda: _listened_on(port), launchers[0], node / "launch.out")
        for node, launcher in zip(nodes, launchers, strict=True):
            _until((node / "worker.pid").exists, launcher, node / "launch.out")
            trees.append([launcher.pid, *map(int, descendants(launcher.pid))])
        _kill(trees[0])
        _until((nodes[1] / "saving").exists, launchers[1], nodes[1] / "launch.out")
        worker = int((nodes[1] / "worker.pid").read_text())
        stop = run(LAUNCH_STOP, {**env, "LAUNCH_PID_FILE": str(nodes[1] / "launch.pid")})
        assert stop.returncode == 0, stop.stderr
        assert (nodes[1] / "saved").exists(), (nodes[1] / "launch.out").read_text()
        assert not running(worker)
    finally:
        _kill([pid for tree in trees for pid in tree])
        for launcher in launchers:
            _end(launcher)


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _until(done: Callable[[], bool], process: subprocess.Popen[bytes], printed: Path) -> None:
    """Until `done()`, `process` still running (what it printed, in `printed`, if not)."""
    while not done():
        assert process.poll() is None, printed.read_text()
        subprocess.run(["sleep", "0.1"], check=True)


def _listened_on(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _end(process: subprocess.Popen[Any]) -> None:
    """`process` and the rest of its session (started with start_new_session) SIGKILLed and
    reaped."""
    with contextlib.suppress(ProcessLookupError):  # the session ended already
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_what_ignores_the_stop_is_killed_after_the_grace(tmp_path: Path) -> None:
    """A launcher that ignores SIGTERM, and a worker below it that does too: after
    LAUNCH_STOP_GRACE both are SIGKILLed, and the stop returns once they are gone, saying so."""
    launcher = subprocess.Popen(
        ["bash", "-c", "trap '' TERM; sleep 600 & echo ready; wait"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert launcher.stdout is not None and launcher.stdout.readline() == "ready\n"
        (worker,) = children(launcher.pid)
        pid_file = tmp_path / "launch.pid"
        pid_file.write_text(f"{launcher.pid} {_start_time(launcher.pid)}\n")
        stop = run(LAUNCH_STOP, {"LAUNCH_PID_FILE": str(pid_file), "LAUNCH_STOP_GRACE": "1"})
        assert stop.returncode == 0, stop.stderr
        assert (
            f"launch-stop: 2 processes of the training (pid {launcher.pid}) still running after "
            "1s; killing them"
        ) in stop.stderr
        # Both gone already (the launcher a zombie until this test reaps it).
        assert not running(worker) and not running(launcher.pid)
    finally:
        _end(launcher)


def test_launch_stop_leaves_a_process_that_reuses_the_recorded_pid(tmp_path: Path) -> None:
    # The file names a live process, but one that started at another time than the launcher
    # that wrote it: the kernel reused the PID, and that process is not ours to stop.
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        started = int(_start_time(bystander.pid))
        pid_file = tmp_path / "launch.pid"
        pid_file.write_text(f"{bystander.pid} {started + 1}\n")
        result = run(LAUNCH_STOP, {"LAUNCH_PID_FILE": str(pid_file)})
        assert result.returncode == 0, result.stderr
        assert f"pid {bystander.pid} is another process now" in result.stdout
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_launch_stop_with_nothing_running(tmp_path: Path) -> None:
    result = run(LAUNCH_STOP, {"LAUNCH_PID_FILE": str(tmp_path / "absent.pid")})
    assert result.returncode == 0 and "no training running" in result.stdout


def test_launch_status_says_whether_the_recorded_launcher_runs(tmp_path: Path) -> None:
    pid_file = tmp_path / "launch.pid"
    env = {"LAUNCH_PID_FILE": str(pid_file)}
    trainer = subprocess.Popen(["sleep", "60"])
    try:
        pid_file.write_text(f"{trainer.pid} {_start_time(trainer.pid)}\n")
        running = run(LAUNCH_STATUS, env)
        assert (running.returncode, running.stdout) == (
            0,
            f"launch-status: running (pid {trainer.pid})\n",
        )
    finally:
        trainer.kill()
        trainer.wait()
    ended = run(LAUNCH_STATUS, env)
    assert (ended.returncode, ended.stdout) == (3, "launch-status: not running\n")
    assert run(LAUNCH_STATUS, {"LAUNCH_PID_FILE": str(tmp_path / "absent")}).returncode == 3


def test_a_training_pods_pid_1_stops_its_training_on_sigterm_and_waits_for_it(
    tmp_path: Path,
) -> None:
    """idle-training.sh as its container's PID 1 (a PID namespace of its own), a training
    started beside it and recorded as the launchers record theirs; SIGTERM from outside the
    namespace, as the kubelet sends it: the training gets SIGTERM and saves, and PID 1 exits 0
    once it has ended. (An idle command that exits on SIGTERM ends the namespace, whose other
    processes the kernel then SIGKILLs: nothing saved.)"""
    saved = tmp_path / "saved"
    # The stand-in training takes a moment to save, as a checkpoint does.
    training = f"trap 'sleep 1; touch {saved}; exit 143' TERM; sleep infinity & wait"
    pod = f'bash -c "{training}" & echo "$!" >"$LAUNCH_PID_FILE"; exec bash {IDLE_TRAINING} 30'
    proc = subprocess.Popen(
        [*as_pid_1(), "bash", "-c", pod],
        env={**os.environ, "LAUNCH_PID_FILE": str(tmp_path / "launch.pid")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        (init,) = children(proc.pid)  # PID 1 inside
        # Readiness: PID 1 is idle-training.sh (its trap set) and idles.
        while not (
            str(IDLE_TRAINING) in command_line(init)
            and ["sleep", "infinity"] in [command_line(c) for c in children(init)]
        ):
            assert proc.poll() is None, proc.communicate()
            subprocess.run(["sleep", "0.05"], check=True)
        os.kill(int(init), signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "launch-stop: stopping training (pid " in out
    assert saved.exists()


def test_idle_training_usage() -> None:
    for args in ((), ("0",), ("30", "x"), ("thirty",)):
        result = run(IDLE_TRAINING, {}, *args)
        assert result.returncode == 2 and "usage: idle-training" in result.stderr, args
