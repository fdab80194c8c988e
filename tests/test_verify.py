"""The fabric check ships with every stack that enables it, with the expectation of its mode."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from gpu_cluster.plan.launch import quantity_bytes
from gpu_cluster.plan.verify import RDMA_BUSBW_PER_NIC, TCP_BUSBW
from tests.conftest import ROOT, container, env_of, one, run_stack


def verify_argv(stack: str, *overrides: str) -> list[str]:
    """What launch-all.sh is started with: CLI NAMESPACE STATEFULSET NODES COMMAND..."""
    command = str(run_stack(stack, *overrides).outputs["verifyCommand"])
    return shlex.split(command.split('bash -c "$launch_all" launch-all ', 1)[1])


def verify_args(stack: str, *overrides: str) -> list[str]:
    argv = verify_argv(stack, *overrides)
    return argv[argv.index("/opt/gpu-cluster/allreduce_check.py") + 1 :]


@pytest.mark.parametrize(
    ("stack", "overrides", "transport", "busbw", "max_bytes"),
    [
        ("barcelona", (), "ib", 4 * RDMA_BUSBW_PER_NIC, "1G"),
        ("nerc-production", (), "socket", TCP_BUSBW, "1G"),
        # GKE: cluster-health-scanner's floor per machine, at its largest message (8 GiB).
        ("a3-high", (), "tcpx", 60.0, "8G"),
        ("gcp-a3", (), "tcpxo", 150.0, "8G"),
        ("gcp-a4", ("gcp.machineType=a3-ultragpu-8g",), "gib", 250.0, "8G"),
        ("gcp-a4", (), "gib", 250.0, "8G"),
        # Plain TCP on an A3 machine is not its GPUDirect fabric: the TCP floor and size.
        ("gcp-a3", ("networkMode=tcp",), "socket", TCP_BUSBW, "1G"),
    ],
)
def test_each_stack_checks_its_own_transport_and_bandwidth(
    stack: str, overrides: tuple[str, ...], transport: str, busbw: float, max_bytes: str
) -> None:
    args = verify_args(stack, *overrides)
    assert args[args.index("--expected-transport") + 1] == transport
    assert float(args[args.index("--expected-busbw-gbps") + 1]) == busbw
    assert args[args.index("--max-bytes") + 1] == max_bytes
    script = one(run_stack(stack), "ConfigMap")["data"]["allreduce_check.py"]
    assert script == (ROOT / "scripts" / "allreduce_check.py").read_text()


def test_the_command_runs_on_every_pod_with_a_fixed_world() -> None:
    assert verify_argv("barcelona", "nodes=4")[:10] == [
        *("oc", "nccl-test", "ml-dev-env", "4"),
        *("env", "TORCHRUN_NNODES=4", "RDZV_ID=verify-ml-dev-env"),
        "/opt/gpu-cluster/launch-torchrun.sh",
        "/opt/gpu-cluster/allreduce_check.py",
        "--backend",
    ]


# A stand-in `oc`: pod 0 hands out the real launch-all.sh; pod 1's check fails at once; pod 0's
# waits (as a rank waits in the rendezvous for a peer that died) until launch-stop.sh runs.
FAKE_OC = """#!/usr/bin/env bash
echo "$*" >>"$STATE/oc.log"
case "$*" in
  *"cat /opt/gpu-cluster/launch-all.sh") cat "$LAUNCH_ALL" ;;
  *launch-stop.sh) touch "$STATE/stopped" ;;
  *ml-dev-env-1*) exit 1 ;;
  *) for _ in $(seq 300); do [[ -e $STATE/stopped ]] && exit 143; sleep 0.1; done ;;
esac
"""


def test_a_pod_that_fails_stops_the_check_everywhere_and_sets_the_exit_code(
    tmp_path: Path,
) -> None:
    (tmp_path / "oc").write_text(FAKE_OC)
    (tmp_path / "oc").chmod(0o755)
    env = {
        "PATH": f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "STATE": str(tmp_path),
        "LAUNCH_ALL": str(ROOT / "scripts" / "launch-all.sh"),
    }
    command = str(run_stack("barcelona").outputs["verifyCommand"])
    result = subprocess.run(
        ["bash", "-c", command], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stderr
    assert "ml-dev-env-1 failed (exit 1)" in result.stderr
    log = (tmp_path / "oc.log").read_text().splitlines()
    stops = [line for line in log if line.endswith("/opt/gpu-cluster/launch-stop.sh")]
    assert sorted(line.split()[3] for line in stops) == ["ml-dev-env-0", "ml-dev-env-1"]


def test_overrides_and_opt_out() -> None:
    args = verify_args("barcelona", "verify.expectedBusbwGbps=50.5", "verify.requireGdr=true")
    assert args[args.index("--expected-busbw-gbps") + 1] == "50.5"
    gke = verify_args("gcp-a3", "verify.expectedBusbwGbps=120", "verify.maxBytes=2G")
    assert gke[gke.index("--expected-busbw-gbps") + 1] == "120"
    assert gke[gke.index("--max-bytes") + 1] == "2G"
    assert "--require-gdr" in args
    off = run_stack("barcelona", "verify.enabled=false")
    assert "verifyCommand" not in off.outputs
    assert "allreduce_check.py" not in one(off, "ConfigMap")["data"]


def test_preflight_is_shipped_and_wired_to_the_launchers_when_asked() -> None:
    # On by default in rdma mode (a too-small memlock must stop training), off elsewhere.
    assert env_of(container(run_stack("nerc-production")))["PREFLIGHT"] == "0"
    asked = env_of(container(run_stack("nerc-production", "verify.preflight=true")))
    assert asked["PREFLIGHT"] == "1"
    off = env_of(container(run_stack("barcelona", "verify.preflight=false")))
    assert off["PREFLIGHT"] == "0"
    run = run_stack("barcelona")
    env = env_of(container(run))
    assert env["PREFLIGHT"] == "1"
    assert env["SHM_MIN_BYTES"] == str(32 * 2**30)  # pod.shmSize 32Gi
    assert env["GPUS_PER_NODE"] == "4"
    # preflight.sh checks the same NICs the detection init container resolves
    assert env["RDMA_INTERFACES"] == "net1,net2,net3,net4"
    assert env["RDMA_HCAS"] == ",,,"  # every HCA detected
    assert env["RDMA_GID_INDEX"] == "nccl"
    assert env["RDMA_MTU"] == "9000"
    assert env["MEMLOCK_STRATEGY"] == "root-ipc-lock"
    assert (
        one(run, "ConfigMap")["data"]["preflight.sh"]
        == (ROOT / "scripts" / "preflight.sh").read_text()
    )
    assert "RDMA_INTERFACES" not in env_of(container(run_stack("nerc-production")))


def test_quantities_convert_to_bytes() -> None:
    assert quantity_bytes("64Gi") == 64 * 2**30
    assert quantity_bytes("500M") == 500 * 10**6
    assert quantity_bytes("1.5Gi") == 3 * 2**29
    assert quantity_bytes("1000") == 1000
