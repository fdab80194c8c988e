"""The run's own metrics (scripts/run_metrics.py) as Prometheus' own parser reads them, and as
the launchers serve them: from a fake trainer's lines, through the launcher's tee, on a real
port (issue #41)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.script_modules import SCRIPTS, load_script
from tools.realtier.controlplane import free_port

# The launchers they start are given train.py, which must be there.
pytestmark = pytest.mark.usefixtures("beside_a_training_script")

run_metrics = load_script("run_metrics")
# Prometheus' text format, version 0.0.4 (prometheus/docs
# content/docs/instrumenting/exposition_formats.md).
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
TORCHRUN = SCRIPTS / "launch-torchrun.sh"
LABELS = {"run": 'my "run"\\1', "namespace": "ml", "rank": "1", "node": "gpu-7"}
# torchrun 2.13's line before it restarts a failed group, as its logger prints it
# (torch/distributed/elastic/agent/server/api.py SimpleElasticAgent._invoke_run).
RESTART_LINE = "[default] Worker group FAILED. 3/3 attempts left; will restart worker group"
# ... and when new nodes join an elastic group: a restart, but no failure.
MEMBERSHIP_LINE = "[default] Detected 1 new nodes from group_rank=0; will restart worker group"
# How long a test waits for the exporter to show what it was sent: a guard against a hang, not
# a measure of speed.
PATIENCE_SECONDS = 30


def samples(exposition: str, expected: dict[str, str] = LABELS) -> dict[tuple[str, str], float]:
    """(sample name, its `le` or "") -> value, every sample checked to carry `expected`."""
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            assert isinstance(sample, Sample)
            labels = dict(sample.labels)
            le = labels.pop("le", "")
            assert labels == expected, sample
            found[(sample.name, le)] = sample.value
    return found


def progress_of(lines: list[tuple[float, str]], attempt: int = 0) -> dict[tuple[str, str], float]:
    progress = run_metrics.RunProgress(re.compile(r"^step \d+\b"), attempt)
    for at, line in lines:
        progress.read(line, at)
    return samples(progress.exposition(LABELS))


def test_steps_their_durations_and_the_last_step() -> None:
    found = progress_of(
        [(100.0, "step 1 loss 2.0\n"), (100.5, "eval\n"), (103.0, "step 2\n"), (104.0, "step 3")]
    )
    assert found[("gpu_cluster_run_steps_total", "")] == 3
    assert found[("gpu_cluster_run_last_step_timestamp_seconds", "")] == 104.0
    # Two durations, 3 s and 1 s.
    assert found[("gpu_cluster_run_step_duration_seconds_count", "")] == 2
    assert found[("gpu_cluster_run_step_duration_seconds_sum", "")] == 4.0
    assert found[("gpu_cluster_run_step_duration_seconds_bucket", "0.5")] == 0
    assert found[("gpu_cluster_run_step_duration_seconds_bucket", "1.0")] == 1
    assert found[("gpu_cluster_run_step_duration_seconds_bucket", "2.5")] == 1
    assert found[("gpu_cluster_run_step_duration_seconds_bucket", "5.0")] == 2
    assert found[("gpu_cluster_run_step_duration_seconds_bucket", "+Inf")] == 2
    assert found[("gpu_cluster_run_restarts_total", "")] == 0


def test_a_restart_is_counted_and_its_gap_is_no_step() -> None:
    found = progress_of(
        [(10.0, "step 1\n"), (11.0, RESTART_LINE), (500.0, "step 1\n"), (502.0, "step 2\n")],
        attempt=2,
    )
    # Two restarts of the JobSet before this pod, one of torchrun's in it.
    assert found[("gpu_cluster_run_restarts_total", "")] == 3
    assert found[("gpu_cluster_run_step_duration_seconds_count", "")] == 1
    assert found[("gpu_cluster_run_step_duration_seconds_sum", "")] == 2.0
    assert found[("gpu_cluster_run_steps_total", "")] == 3


def test_the_gpus_the_pod_holds_are_a_gauge_only_when_given() -> None:
    """GPU time per run and namespace (a team's) is the sum of this gauge over the run's pods."""
    held = run_metrics.RunProgress(None, 0, gpus=8)
    assert samples(held.exposition(LABELS))[("gpu_cluster_run_gpus", "")] == 8
    unknown = run_metrics.RunProgress(None, 0)
    assert ("gpu_cluster_run_gpus", "") not in samples(unknown.exposition(LABELS))


def test_a_pattern_sees_the_line_without_its_end() -> None:
    r"""As the config checks a pattern (it may not match an empty line) and the timeline reads
    lines: `\n` or `\s$` match no line."""
    for pattern in (r"\n", r"\s$"):
        progress = run_metrics.RunProgress(re.compile(pattern), 0)
        for at, line in enumerate(("step 1\n", "step 2\r\n", "eval\n")):
            progress.read(line, float(at))
        assert samples(progress.exposition(LABELS))[("gpu_cluster_run_steps_total", "")] == 0


def test_a_membership_change_is_no_restart() -> None:
    found = progress_of([(1.0, MEMBERSHIP_LINE)])
    assert found[("gpu_cluster_run_restarts_total", "")] == 0


def test_before_any_step_there_is_no_last_step_and_without_a_pattern_no_step() -> None:
    progress = run_metrics.RunProgress(None, 0)
    progress.read("step 1\n", 5.0)
    found = samples(progress.exposition(LABELS))
    assert found[("gpu_cluster_run_steps_total", "")] == 0
    assert ("gpu_cluster_run_last_step_timestamp_seconds", "") not in found


# --- the launcher and the exporter, for real --------------------------------------------------


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.headers["Content-Type"] == TEXT_FORMAT
            return str(response.read().decode())
    except OSError:
        return None


def wait_for(what: Callable[[], bool], why: str) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not what():
        assert time.monotonic() < deadline, f"not seen in {PATIENCE_SECONDS} s: {why}"
        time.sleep(0.05)


def fake_trainer(where: Path) -> Path:
    """Stands in for torchrun: prints two steps on stdout and torchrun's restart line on stderr,
    waits for $GO, then prints a third step."""
    fake = where / "fake-torchrun"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "step 1"\n'
        'echo "step 2"\n'
        f'echo "{RESTART_LINE}" >&2\n'
        'while [ ! -e "$GO" ]; do sleep 0.05; done\n'
        'echo "step 3"\n'
    )
    fake.chmod(0o755)
    return fake


def launcher_environment(where: Path) -> dict[str, str]:
    """The launcher's environment, its exporter's on a free port, the trainer a fake."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "NNODES": "2",
        "GPUS_PER_NODE": "8",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        "TORCHRUN_BIN": str(fake_trainer(where)),
        "NCCL_ENV_FILE": str(where / "absent.env"),
        "LAUNCH_PID_FILE": str(where / "launch.pid"),
        "RUN_METRICS_PYTHON": sys.executable,
        "RUN_METRICS_PORT": str(free_port()),
        "RUN_METRICS_STEP_PATTERN": r"^step \d+$",
        "RUN_RESTART_ATTEMPT": "4",
        "GO": str(where / "go"),
        "RUN_NAME": LABELS["run"],
        "POD_NAMESPACE": LABELS["namespace"],
        "NODE_RANK": LABELS["rank"],
        "NODE_NAME": LABELS["node"],
    }


@contextmanager
def running_launcher(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """launch-torchrun.sh with `env`, until its trainer is let go ($GO) and it ends."""
    launcher = subprocess.Popen(
        ["bash", str(TORCHRUN), "train.py"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield launcher
    finally:
        Path(env["GO"]).touch()
        launcher.communicate(timeout=PATIENCE_SECONDS)


@pytest.fixture
def launcher_env(tmp_path: Path) -> dict[str, str]:
    return launcher_environment(tmp_path)


@pytest.fixture
def launched(launcher_env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    with running_launcher(launcher_env) as launcher:
        yield launcher


def test_the_launcher_serves_the_trainers_progress_and_keeps_its_output(
    launcher_env: dict[str, str], launched: subprocess.Popen[str]
) -> None:
    port = int(launcher_env["RUN_METRICS_PORT"])

    def shows_restart() -> bool:
        text = scrape(port)
        return text is not None and samples(text)[("gpu_cluster_run_restarts_total", "")] == 5

    wait_for(shows_restart, "torchrun's restart on the trainer's stderr")
    wait_for(
        lambda: samples(scrape(port) or "")[("gpu_cluster_run_steps_total", "")] == 2,
        "the trainer's two steps",
    )
    gpus_served = samples(scrape(port) or "")[("gpu_cluster_run_gpus", "")]
    Path(launcher_env["GO"]).touch()
    out, err = launched.communicate(timeout=PATIENCE_SECONDS)
    assert launched.returncode == 0, err
    # The training's output still reaches the launcher's own stdout and stderr, whole.
    assert out.splitlines() == ["step 1", "step 2", "step 3"]
    assert RESTART_LINE in err.splitlines()
    # The GPUs the pod holds, from the launchers' own GPUS_PER_NODE.
    assert gpus_served == int(launcher_env["GPUS_PER_NODE"])
    # With the trainer gone, the exporter stops and frees its port.
    wait_for(lambda: scrape(port) is None, "the exporter stopping after the trainer")


def test_the_training_goes_on_when_the_exporter_is_gone(
    launcher_env: dict[str, str], launched: subprocess.Popen[str]
) -> None:
    port = int(launcher_env["RUN_METRICS_PORT"])
    wait_for(lambda: scrape(port) is not None, "the exporter serving")
    exporter = subprocess.run(
        ["pgrep", "-f", "-P", str(launched.pid), "run_metrics.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(exporter) == 1
    os.kill(int(exporter[0]), signal.SIGKILL)
    wait_for(lambda: scrape(port) is None, "the exporter gone")
    Path(launcher_env["GO"]).touch()
    out, err = launched.communicate(timeout=PATIENCE_SECONDS)
    assert launched.returncode == 0, err
    assert out.splitlines() == ["step 1", "step 2", "step 3"]


def test_a_taken_port_leaves_the_training_without_metrics_not_stopped(
    launcher_env: dict[str, str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("", int(launcher_env["RUN_METRICS_PORT"])))
        taken.listen()
        Path(launcher_env["GO"]).touch()
        result = subprocess.run(
            ["bash", str(TORCHRUN), "train.py"],
            env=launcher_env,
            capture_output=True,
            text=True,
            timeout=PATIENCE_SECONDS,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert "run metrics did not start" in result.stderr
    assert result.stdout.splitlines() == ["step 1", "step 2", "step 3"]


def test_sigterm_stops_the_exporter(tmp_path: Path) -> None:
    port = free_port()
    exporter = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "run_metrics.py"), str(tmp_path), str(os.getpid())],
        env={"RUN_METRICS_PORT": str(port)},
    )
    wait_for(lambda: (tmp_path / run_metrics.READY).exists(), "the exporter ready")
    exporter.send_signal(signal.SIGTERM)
    assert exporter.wait(timeout=PATIENCE_SECONDS) == 0


@pytest.mark.parametrize(
    "env",
    [{}, {"RUN_METRICS_PORT": "http"}, {"RUN_METRICS_PORT": "9", "RUN_METRICS_STEP_PATTERN": "("}],
    ids=["no port", "bad port", "bad pattern"],
)
def test_an_incomplete_environment_is_a_configuration_error(
    tmp_path: Path, env: dict[str, str]
) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "run_metrics.py"), str(tmp_path), "1"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == run_metrics.EX_CONFIG, result.stderr
    assert "RUN_METRICS_" in result.stderr
