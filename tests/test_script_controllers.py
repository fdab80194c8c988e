"""The stack's script controllers (scripts/node_health_gate.py, node_health_runner.py) stop
on SIGTERM as their Deployments' pods are stopped: run for real as PID 1 of a PID namespace, as
in their container, and signalled from outside it, as the container runtime signals them. Their
API server is one that refuses connections (an API server restarting): the loop goes on."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import certifi
import pytest

from gpu_cluster.plan.health_gate import HEALTH_GATE_SCRIPT
from gpu_cluster.plan.health_runner import HEALTH_RUNNER_SCRIPT
from tests.cli import as_pid_1
from tests.script_modules import SCRIPTS
from tools.realtier.controlplane import free_port

SETTINGS = {
    HEALTH_GATE_SCRIPT: {
        "HEALTH_GATE_CHECK": "node-health",
        "HEALTH_GATE_CONTROLLER": "gpu-cluster.io/node-health",
        "HEALTH_GATE_NAMESPACE": "training",
        "HEALTH_GATE_CHECKS": "gpu",
        "HEALTH_GATE_MAX_AGE_SECONDS": "86400",
        "HEALTH_GATE_RETRY_SECONDS": "600",
        "HEALTH_GATE_POLL_SECONDS": "15",
    },
    HEALTH_RUNNER_SCRIPT: {
        "HEALTH_RUNNER_NAMESPACE": "training",
        "HEALTH_RUNNER_NODES": "pool=gpu",
        "HEALTH_RUNNER_CHECKS": "gpu=gpu-cluster-gpu-check",
        "HEALTH_RUNNER_RECHECK_SECONDS": "43200",
        "HEALTH_RUNNER_RETRY_SECONDS": "600",
        "HEALTH_RUNNER_POLL_SECONDS": "15",
    },
}


def ns_pids(pid: str) -> list[str]:
    """The process's PID in each PID namespace it is in, outermost first (proc(5), NSpid)."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    (line,) = (line for line in status if line.startswith("NSpid:"))
    return line.split()[1:]


@pytest.mark.parametrize("script", sorted(SETTINGS))
def test_a_controller_as_pid_1_stops_on_sigterm(script: str, tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("token\n")
    shutil.copy(certifi.where(), account / "ca.crt")
    env = {
        **SETTINGS[script],
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(free_port()),  # nothing listens there
        "SERVICEACCOUNT_DIR": str(account),
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.Popen(
        [*as_pid_1(), sys.executable, str(SCRIPTS / script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        # Readiness: its first pass has failed (connection refused) and it waits for the next.
        first = proc.stderr.readline()
        assert "Connection refused" in first, first
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        (controller,) = children  # PID 1 inside, this PID outside
        assert ns_pids(controller)[-1] == "1"
        os.kill(int(controller), signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert err.endswith(f"{Path(script).stem}: stopping (SIGTERM)\n")
