"""scripts/storage_check.py, run as the pods run it: the storage gate before the fabric check
and training (gpu_cluster/plan/verify.py storage_gate puts it in front of both)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_cluster.config.loading import load_settings
from gpu_cluster.plan.verify import gated, storage_gate
from tests.conftest import ROOT, manifests, run_stack
from tests.edits import A4_STATEFULSET
from tests.test_volumes import GKE

SCRIPT = ROOT / "scripts" / "storage_check.py"
LINE = re.compile(r"^storage \S+ (\S+) \((\d+) MB\): save (.+), restore (.+)$")


def check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, check=False
    )


def figures(out: str) -> dict[str, tuple[int, str, str]]:
    found = {}
    for line in out.splitlines():
        m = LINE.match(line)
        assert m, line
        found[m[1]] = (int(m[2]), m[3], m[4])
    return found


def test_a_writable_path_is_saved_to_and_restored_from_then_left_as_it_was(
    tmp_path: Path,
) -> None:
    (tmp_path / "kept").write_text("user data")
    done = check("--bytes", "8M", "--streams", "4", tmp_path)
    assert done.returncode == 0, done.stderr
    ((mb, save, restore),) = figures(done.stdout).values()
    assert mb == 8  # 4 streams of 2 MiB: 8,388,608 bytes
    assert re.fullmatch(r"\d+\.\d\d GB/s \(\d+\.\d\d s/GB\)", save)
    assert re.fullmatch(r"\d+\.\d\d GB/s \(\d+\.\d\d s/GB\)", restore)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]


def test_a_check_stopped_mid_write_removes_its_files(tmp_path: Path) -> None:
    """SIGTERM while the streams write (the pod deleted): the check's files go with it. The
    process is held (SIGSTOP) from the moment its files appear until it has the signal, so it
    cannot end first."""
    (tmp_path / "kept").write_text("user data")
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, "--bytes", "1G", "--streams", "2", tmp_path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not list(tmp_path.glob(".gpu-cluster-storage-check-*")):  # readiness
            assert proc.poll() is None, proc.communicate()
        os.kill(proc.pid, signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGTERM)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "storage_check: stopped (SIGTERM); its files removed" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]


def test_a_missed_threshold_fails_and_starts_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    data = tmp_path / "data"
    data.mkdir()
    done = check("--bytes", "4M", f"{data}:1000000:", "--", "touch", marker)
    assert done.returncode == 1
    assert f"{data}: write " in done.stderr and "is below 1e+06 GB/s" in done.stderr
    assert not marker.exists()


def test_when_every_threshold_is_met_the_command_replaces_the_check(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    data = tmp_path / "data"
    data.mkdir()
    done = check("--bytes", "4M", f"{data}:0.000001:0.000001", "--", "touch", marker)
    assert done.returncode == 0, done.stderr
    assert marker.exists()


def test_a_read_only_path_is_read_from_the_files_already_there(tmp_path: Path) -> None:
    (tmp_path / "shard-0").write_bytes(b"x" * 3_000_000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "shard-1").write_bytes(b"y" * 3_000_000)
    done = check("--bytes", "4M", "--streams", "2", "--read-only", f"{tmp_path}::0.000001")
    assert done.returncode == 0, done.stderr
    ((mb, save, restore),) = figures(done.stdout).values()
    assert (mb, save) == (4, "-")  # 2 MiB of each file, nothing written
    assert restore.endswith("s/GB)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard-0", "sub"]


def test_a_read_threshold_on_an_empty_read_only_path_fails_as_not_measured(
    tmp_path: Path,
) -> None:
    done = check("--read-only", f"{tmp_path}::1")
    assert done.returncode == 1
    assert "read not measured is below 1 GB/s" in done.stderr


def test_a_path_that_is_not_mounted_is_a_configuration_error(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    done = check(tmp_path / "missing", "--", "touch", marker)
    assert done.returncode == 78  # EX_CONFIG: the JobSet fails the run, no restart
    assert "not a directory" in done.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "args", [["--"], ["--bytes", "1e3", "."], ["--streams", "0", "."], [".:1"], ["--bytes", "0"]]
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert check(*args).returncode == 2


def test_pods_sharing_a_volume_check_it_at_once_without_meeting(tmp_path: Path) -> None:
    runs = [
        subprocess.Popen(
            [sys.executable, SCRIPT, "--bytes", "16M", "--streams", "4", tmp_path],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for run in runs:
        out, err = run.communicate()
        assert run.returncode == 0, err
        assert figures(out)
    assert list(tmp_path.iterdir()) == []


# --- where the stack puts it -----------------------------------------------------------------

VOLUMES = {
    "storage": {
        "mode": "per-pod",
        "volumes": [
            {"name": "data", "mountPath": "/data", "readOnly": True, "minReadGbps": 2,
             "gcsFuse": {"bucket": "team-data"}},
            {"name": "ckpt", "mountPath": "/ckpt", "minWriteGbps": 1.5,
             "gcsFuse": {"bucket": "team-ckpt"}},
        ]
    },
}  # fmt: skip


def test_the_gate_checks_every_volume_with_its_thresholds_one_stream_per_gpu() -> None:
    s = load_settings({**GKE, **VOLUMES, "verify": {"storageCheckBytes": "4G"}})
    gate = storage_gate(s)
    assert gate == [
        "/opt/gpu-cluster/storage_check.py",
        "--bytes",
        "4G",
        "--streams",
        "8",
        "--read-only",
        "/data::2",
        "/ckpt:1.5:",
        "--",
    ]
    run = gated(s, ("launch.sh", "train.py"))
    assert run[: len(gate)] == tuple(gate)
    assert run[len(gate)] == "/opt/gpu-cluster/fabric-gate.sh"
    assert run[-2:] == ("launch.sh", "train.py")


def test_a_stateful_set_stack_checks_storage_before_the_fabric_on_every_pod() -> None:
    run = run_stack("gcp-a4", *A4_STATEFULSET)
    argv = shlex.split(str(run.outputs["verifyCommand"]))
    start = argv.index("/opt/gpu-cluster/storage_check.py")
    end = argv.index("--", start)
    assert argv[start:end] == [
        "/opt/gpu-cluster/storage_check.py",
        "--bytes",
        "1G",
        "--streams",
        "8",
        "--read-only",
        "/data::",
        "/checkpoints::",
    ]
    assert argv[end + 1 : end + 3] == ["env", "TORCHRUN_NNODES=2"]
    (scripts,) = [c for c in manifests(run, "ConfigMap") if "storage_check.py" in c["data"]]
    assert scripts["data"]["storage_check.py"] == SCRIPT.read_text()


def test_without_volumes_or_checks_nothing_of_it_ships() -> None:
    assert storage_gate(load_settings(GKE)) == []
    run = run_stack("gcp-a3")
    assert not any("storage_check.py" in c["data"] for c in manifests(run, "ConfigMap"))
    assert "storage_check.py" not in str(run.outputs["verifyCommand"])
    bucket = {"name": "d", "mountPath": "/d", "gcsFuse": {"bucket": "team-d"}}
    storage = {"mode": "per-pod", "volumes": [bucket]}
    off = load_settings({**GKE, "verify": {"enabled": False}, "storage": storage})
    assert gated(off, ("launch.sh",)) == ("launch.sh",)
