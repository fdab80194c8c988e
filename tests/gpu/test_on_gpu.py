"""What only a GPU shows: the in-pod scripts on a real NVIDIA GPU, driver and NCCL.

CI's machines have no GPU, so this folder is never collected there (tests/conftest.py,
`collect_ignore`); it runs on a GPU machine, where it needs only what an NGC PyTorch image has
(Python, PyTorch, pytest, nvidia-smi, GNU coreutils), not this repository's requirements::

    python3 -m pytest --noconftest -p no:cacheprovider -rA tests/gpu

Each test fails, never skips, when the machine has no GPU. What a single GPU cannot show (two
ranks over NCCL, a NIC, DCGM) is listed in docs/unverified.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
# Every subprocess here answers within this; a hang is a failure, not a stuck run.
TIMEOUT = 240
GIB = 1 << 30


def gpu_count() -> int:
    import torch

    assert torch.cuda.is_available(), "no CUDA device: run this folder on a GPU machine"
    return int(torch.cuda.device_count())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def torchrun_bin() -> str:
    found = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    assert Path(found).exists(), "torchrun not found beside python3"
    return found


def launcher_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """What the pod spec gives launch-torchrun.sh, for one node with this machine's GPUs."""
    return {
        **os.environ,
        "NNODES": "1",
        "GPUS_PER_NODE": str(gpu_count()),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "TORCHRUN_BIN": torchrun_bin(),
        "LAUNCH_PID_FILE": str(tmp_path / "launch.pid"),
        "NCCL_ENV_FILE": str(tmp_path / "no-nccl.env"),
        **extra,
    }


def run(args: list[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


# --- preflight ---------------------------------------------------------------------------------


def test_preflight_counts_this_machines_gpus_with_nvidia_smi() -> None:
    """preflight.sh's GPU count through the real `nvidia-smi -L` agrees with CUDA's, and one
    more than the machine has fails with the count and the fix."""
    count = gpu_count()
    ok = run(["bash", str(SCRIPTS / "preflight.sh")], {**os.environ, "GPUS_PER_NODE": str(count)})
    print(ok.stdout, ok.stderr)
    assert ok.returncode == 0, ok.stderr
    assert f"preflight: ok: GPUs: {count} visible (nvidia-smi -L)" in ok.stdout

    more = count + 1
    short = run(["bash", str(SCRIPTS / "preflight.sh")], {**os.environ, "GPUS_PER_NODE": str(more)})
    assert short.returncode == 1
    assert f"FAIL: GPUs: {count} visible, GPUS_PER_NODE={more} (nvidia-smi -L)" in short.stderr


def test_gdr_path_reads_this_machines_driver_and_kernel() -> None:
    """gdr-path.sh reads the real driver's /proc/driver/nvidia/version and the kernel release:
    its verdict names a module kind or a path, never an unreadable file. (With no RDMA NIC here,
    whether NCCL then uses the path is the fabric check's GDRDMA, not shown.)"""
    version_line = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    probe = (
        'PROG=gdr; pass() { echo "PASS $*"; }; fail() { echo "FAIL $*"; }; '
        f"SYSFS_ROOT=/sys; . {SCRIPTS / 'gdr-path.sh'}; check_gdr"
    )
    out = run(["bash", "-c", probe])
    print(version_line, out.stdout, out.stderr, sep="\n")
    assert out.returncode == 0, out.stderr
    assert "unreadable" not in out.stdout
    if "Open Kernel Module" in version_line:
        assert out.stdout.startswith("PASS GPUDirect RDMA:"), out.stdout
    else:  # the proprietary module, no peermem: named, as a warning
        assert "not the open kernel module" in out.stdout, out.stdout


# --- the fabric check over NCCL ------------------------------------------------------------------


def fabric_gate(
    tmp_path: Path, *check_args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None, str]:
    """fabric-gate.sh, the JobSet pods' entry, with the check alone (no launcher after `--`):
    its result, the check's JSON document (rank 0's stdout) and the summary it wrote where the
    pod's termination log would be."""
    message = tmp_path / "termination-log"
    env = launcher_env(tmp_path, FABRIC_CHECK_MESSAGE_FILE=str(message))
    result = run(["bash", str(SCRIPTS / "fabric-gate.sh"), *check_args, "--json", "--"], env)
    print(result.stdout, result.stderr)
    start = result.stdout.find("{\n")
    document = json.JSONDecoder().raw_decode(result.stdout[start:])[0] if start >= 0 else None
    return result, document, message.read_text() if message.exists() else ""


# The health check's sweep (Google's all_gather_perf -b 2G -e 8G -f 2), few iterations.
SWEEP = ("--backend", "nccl", "--min-bytes", "2G", "--max-bytes", "8G", "--iters", "5")


def peak_memory_gbps() -> float:
    """The GPU's peak memory bandwidth from NVML (its top memory clock and bus width, two
    transfers per clock), in GB/s: a bound, from the hardware, on any copy the check times."""
    import pynvml  # nvidia-ml-py, which the GPU machine's image and NGC's PyTorch images carry

    pynvml.nvmlInit()
    try:
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        mhz = float(pynvml.nvmlDeviceGetMaxClockInfo(gpu, pynvml.NVML_CLOCK_MEM))
        bus_bits = float(pynvml.nvmlDeviceGetMemoryBusWidth(gpu))
    finally:
        pynvml.nvmlShutdown()
    return 2 * mhz * 1e6 * bus_bits / 8 / 1e9


def test_fabric_check_over_nccl_times_8_gib_gathers_and_writes_its_summary(
    tmp_path: Path,
) -> None:
    """The whole sweep, 2 GiB to 8 GiB gathered buffers on the GPU, through NCCL: the data check
    passes before and after the timed calls, the CUDA-event times cover the copies (no faster
    than the memory can move the bytes), NCCL's own INFO log is found and read back, and rank
    0's summary, the measured busbw first, is in the termination log. One node has no fabric:
    its busbw is 0 by definition ((n-1)/n), so the floor here is 0."""
    result, document, message = fabric_gate(tmp_path, *SWEEP, "--expected-busbw-gbps", "0")
    assert result.returncode == 0, result.stderr
    assert document is not None
    rows = document["rows"]
    assert [row["size_bytes"] for row in rows] == [2 * GIB, 4 * GIB, 8 * GIB]
    assert all(row["data_ok"] for row in rows)
    # An out-of-place gather on one rank reads and writes each byte once.
    ceiling = peak_memory_gbps() / 2
    for row in rows:
        assert 0 < row["algbw_gbps"] <= ceiling, (row, ceiling)
    per_rank = document["transport"]["per_rank"]
    assert len(per_rank) == gpu_count()
    assert all(entry["log"] and entry["report"] for entry in per_rank), per_rank
    assert document["verdict"] == "PASS"
    busbw = document["busbw_avg_gbps"]
    assert (
        message
        == f"busbw {busbw:.3f} GB/s over {2 * GIB}..{8 * GIB} B: " + document["verdict_line"]
    ), message


def test_fabric_check_fails_when_nccl_did_not_use_the_expected_network(tmp_path: Path) -> None:
    """Asked for InfiniBand/RoCE on a machine with no RDMA NIC, the check reads the network NCCL
    really chose from its log and fails, naming it; the gate exits with torchrun's 1, on which a
    JobSet restarts the run, and says so."""
    assert not any(Path("/sys/class/infiniband").glob("*")), "this machine has an RDMA device"
    result, document, message = fabric_gate(
        tmp_path, "--backend", "nccl", "--min-bytes", "1M", "--max-bytes", "64M",
        "--expected-transport", "ib",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert document is not None and document["verdict"] == "FAIL"
    assert document["transport"]["detected"] == "socket", document["transport"]
    assert any(
        reason.startswith("transport socket seen, expected ib") for reason in document["reasons"]
    ), document["reasons"]
    assert "fabric-gate: the fabric check failed (exit 1)" in result.stderr
    assert message.endswith(document["verdict_line"]), (message, document["verdict_line"])


# --- training on the GPU: launch, metrics, stop, resume -------------------------------------------


def start_training(tmp_path: Path, checkpoints: Path, port: int) -> subprocess.Popen[str]:
    env = launcher_env(
        tmp_path,
        RUN_METRICS_PORT=str(port),
        RUN_METRICS_PYTHON=sys.executable,
        RUN_METRICS_STEP_PATTERN=r"^step \d+ loss",
        RUN_NAME="gpu-check",
        POD_NAMESPACE="local",
        NODE_RANK="0",
        NODE_NAME=socket.gethostname(),
    )
    train = ROOT / "examples" / "checkpointing" / "train.py"
    return subprocess.Popen(
        [
            "bash",
            str(SCRIPTS / "launch-torchrun.sh"),
            str(train),
            "--steps",
            "100000",
            "--save-every",
            "1000",
            "--step-seconds",
            "0.01",
            "--checkpoint-dir",
            str(checkpoints),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until(process: subprocess.Popen[str], pattern: str) -> tuple[re.Match[str], str]:
    assert process.stdout is not None
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if found := re.search(pattern, line):
            return found, "".join(seen)
    raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(seen)}")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        body: bytes = response.read()
        return body.decode()


def gpu_compute_pids() -> set[int]:
    query = run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"])
    assert query.returncode == 0, query.stderr
    return {int(pid) for pid in query.stdout.split()}


def test_training_on_the_gpu_exports_steps_stops_with_a_checkpoint_and_resumes(
    tmp_path: Path,
) -> None:
    """The example training script under the launcher, on CUDA: its step lines become the run's
    step counter, SIGTERM to the launcher (as the kubelet sends it) ends in a complete
    checkpoint of GPU tensors, and the next start resumes from exactly that step."""
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    port = free_port()
    first = start_training(tmp_path, checkpoints, port)
    try:
        read_until(first, r"^step 50 loss")
        metrics = scrape(port)
        counted = re.search(
            r'^gpu_cluster_run_steps_total\{[^}]*run="gpu-check"[^}]*\} (\d+)', metrics, re.M
        )
        assert counted and int(counted.group(1)) >= 50, metrics
        # The trainer (torchrun's worker) holds the GPU, not the CPU.
        workers = {int(pid) for pid in run(["pgrep", "-f", "train.py"]).stdout.split()}
        assert workers & gpu_compute_pids(), (workers, gpu_compute_pids())
        os.kill(first.pid, signal.SIGTERM)
        saved, _ = read_until(first, r"^SIGTERM: saved .*step-(\d{8})")
        first.wait(timeout=TIMEOUT)
    finally:
        if first.poll() is None:
            first.kill()
    step = int(saved.group(1))
    assert (checkpoints / f"step-{step:08d}" / "COMPLETE").exists()

    second = start_training(tmp_path, checkpoints, free_port())
    try:
        resumed, _ = read_until(second, r"^resumed from step (\d+)")
        assert int(resumed.group(1)) == step
        read_until(second, rf"^step {step + 1} loss")
    finally:
        second.send_signal(signal.SIGTERM)
        try:
            second.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            second.kill()
