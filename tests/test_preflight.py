"""scripts/preflight.sh and the launchers' PREFLIGHT=1 hook, on fake nodes.

A fake node is a tmp tree: sysfs (tests/fake_sysfs.py), /dev (plain files named like the device
nodes), /proc/self/status (CapEff), the NCCL env file, and a bin dir that is the scripts' whole
PATH: the real bash, df and dirname, plus fakes (df, nvidia-smi) where a test needs them. So the
host (its GPUs, its nvidia-smi, its /dev/shm) cannot leak in. `ulimit -l` is set for real with
`ulimit -S -l` in a wrapper shell; only "unlimited", which needs privilege, is faked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.fake_sysfs import (
    HCAS,
    IFACES,
    add_netdev,
    add_verbs_link,
    bring_up,
    fake_ip,
    fake_proc_net,
    macvlan_node,
    set_mtu,
    set_operstate,
    set_port_state,
    sriov_node,
)

# The launchers they start are given train.py, which must be there.
pytestmark = pytest.mark.usefixtures("beside_a_training_script")

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
PREFLIGHT = SCRIPTS / "preflight.sh"
TORCHRUN = SCRIPTS / "launch-torchrun.sh"
DEEPSPEED = SCRIPTS / "launch-deepspeed.sh"
BASH = shutil.which("bash") or "/bin/bash"

GPUS = 4
GIB = 1 << 30
MIB = 1 << 20
# A memlock soft limit every environment can set (Docker's default hard limit is 64 KiB).
LOW_MEMLOCK_KB = 64
# CapEff of a default container (Docker/CRI-O capability set) without and with CAP_IPC_LOCK (14).
CAPS_DEFAULT = 0x00000000A80425FB
CAP_IPC_LOCK = 1 << 14
# /proc/driver/nvidia/version's first line, the open and the proprietary GPU kernel module.
OPEN_MODULE = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Sep 30 2025"
)
PROPRIETARY_MODULE = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.08  Sat Oct 26 2024"

Result = subprocess.CompletedProcess[str]


@dataclass
class Node:
    root: Path
    ifaces: tuple[str, ...] = IFACES

    @property
    def sys(self) -> Path:
        return self.root / "sys"

    @property
    def dev(self) -> Path:
        return self.root / "dev"

    @property
    def proc(self) -> Path:
        return self.root / "proc"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def env_file(self) -> Path:
        return self.root / "run/gpu-cluster/nccl.env"

    def env(self) -> dict[str, str]:
        return {
            "PATH": str(self.bin),
            "GPUS_PER_NODE": str(GPUS),
            "SHM_MIN_BYTES": "32Gi",
            "RDMA_INTERFACES": ",".join(self.ifaces),
            "RDMA_GID_INDEX": "auto",
            "NCCL_ENV_FILE": str(self.env_file),
            "SYSFS_ROOT": str(self.sys),
            "IP_BIN": str(fake_ip(self.sys)),
            "RDMA_MTU": "9000",
            "DEV_ROOT": str(self.dev),
            "PROC_ROOT": str(self.proc),
        }

    def env_without_ip(self) -> dict[str, str]:
        """env() in an image without iproute2: no `ip` on PATH, the addresses the scripts read
        instead written to the node's /proc/net as the kernel lays them out."""
        assert shutil.which("ip", path=str(self.bin)) is None
        fake_proc_net(self.proc, self.sys)
        return {k: v for k, v in self.env().items() if k != "IP_BIN"}

    def set_gpus(self, n: int) -> None:
        for old in self.dev.glob("nvidia[0-9]*"):
            old.unlink()
        for i in range(n):
            (self.dev / f"nvidia{i}").touch()

    def set_caps(self, capeff: int) -> None:
        status = self.proc / "self/status"
        status.parent.mkdir(parents=True, exist_ok=True)
        status.write_text(
            f"Name:\tbash\nCapInh:\t0000000000000000\nCapPrm:\t{capeff:016x}\n"
            f"CapEff:\t{capeff:016x}\nCapBnd:\t{capeff:016x}\n"
        )

    def set_gpu_driver(self, version: str, kernel: str) -> None:
        """The GPU kernel module's /proc/driver/nvidia/version line and the kernel's release."""
        (self.proc / "driver/nvidia").mkdir(parents=True, exist_ok=True)
        (self.proc / "driver/nvidia/version").write_text(version + "\n")
        (self.proc / "sys/kernel").mkdir(parents=True, exist_ok=True)
        (self.proc / "sys/kernel/osrelease").write_text(kernel + "\n")

    def fake(self, name: str, body: str) -> None:
        tool = self.bin / name
        if tool.is_symlink():
            tool.unlink()
        tool.write_text("#!/bin/sh\n" + body)
        tool.chmod(0o755)

    def fake_df(self, size: int) -> None:
        # Answers only the exact call preflight.sh is documented to make.
        self.fake(
            "df",
            'if [ "$*" != "-B1 --output=size /dev/shm" ]; then echo "unexpected: df $*" >&2; '
            "exit 2; fi\n"
            f"printf '%s\\n' '  1B-blocks' '{size}'\n",
        )

    def fake_deepspeed(self, version: str | None) -> None:
        """A python3 that answers preflight's DeepSpeed version query (None: not installed)."""
        answer = (
            f"echo '{version}'"
            if version
            else "echo 'importlib.metadata.PackageNotFoundError: No package metadata was found "
            "for deepspeed' >&2; exit 1"
        )
        ask = '[ "$1" = -c ] && case "$2" in *\'m.version("deepspeed")\'*) ;; *) exit 2 ;; esac'
        self.fake("python3", f"{ask}\n{answer}\n")

    def fake_nvidia_smi(self, gpus: int, mig_per_gpu: int = 0) -> None:
        lines = []
        for g in range(gpus):
            lines.append(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-{g:08x}-0000)")
            lines += [
                f"  MIG 1g.10gb     Device  {m}: (UUID: MIG-{g}{m})" for m in range(mig_per_gpu)
            ]
        out = "".join(f"echo '{line}'\n" for line in lines)
        self.fake("nvidia-smi", f'[ "$1" = -L ] || exit 2\n{out}')


def real_tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} not found on PATH"
    return found


@pytest.fixture
def node(tmp_path: Path) -> Node:
    """A healthy OpenShift RoCE node: 4 GPUs, 64 GiB /dev/shm, IPC_LOCK, net1..net4 up on
    SR-IOV VFs whose ports are ACTIVE, verbs devices present, detect-rdma's env file written."""
    return healthy_node(tmp_path / "node")


def healthy_node(root: Path, ifaces: tuple[str, ...] = IFACES) -> Node:
    """The `node` fixture's node, its RDMA interfaces named `ifaces` (RDMA_INTERFACES too)."""
    n = Node(root, ifaces)
    bring_up(sriov_node(n.sys, ifaces=ifaces))
    n.dev.mkdir(parents=True)
    n.set_gpus(GPUS)
    # Other NVIDIA nodes that are not GPUs.
    for other in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"):
        (n.dev / other).touch()
    (n.dev / "nvidia-caps").mkdir()
    (n.dev / "infiniband").mkdir()
    for i in range(len(HCAS)):
        (n.dev / "infiniband" / f"uverbs{i}").touch()
    (n.dev / "infiniband/rdma_cm").touch()
    n.set_caps(CAPS_DEFAULT | CAP_IPC_LOCK)
    n.set_gpu_driver(OPEN_MODULE, "5.14.0-570.el9_6.x86_64")
    n.env_file.parent.mkdir(parents=True)
    n.env_file.write_text("export NCCL_IB_HCA==mlx5_6:1\nexport NCCL_IB_GID_INDEX=3\n")
    n.bin.mkdir()
    for tool in ("bash", "df", "dirname", "rm", "sleep", "timeout"):
        (n.bin / tool).symlink_to(real_tool(tool))
    n.fake_df(64 * GIB)
    return n


def preflight(env: dict[str, str], memlock_kb: int | None = LOW_MEMLOCK_KB) -> Result:
    """Run preflight.sh with exactly `env`; with memlock_kb, under that `ulimit -l` soft limit."""
    argv = [BASH, str(PREFLIGHT)]
    if memlock_kb is not None:
        argv = [BASH, "-c", 'ulimit -S -l "$1" && exec "$0" "$2"', BASH, str(memlock_kb), *argv[1:]]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def passes(result: Result) -> str:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines()[-1].startswith("preflight: OK (")
    return result.stdout


def fails(result: Result, *names: str) -> list[str]:
    """Assert exit 1 and that one FAIL line mentions all of `names`; return the FAIL lines."""
    assert result.returncode == 1, result.stdout
    lines = result.stderr.splitlines()
    failed = [line for line in lines if line.startswith("preflight: FAIL: ")]
    assert lines[-1] == f"preflight: {len(failed)} of {checks_run(result)} checks failed"
    assert len(lines) == len(failed) + 1, "one line per problem, plus the summary"
    assert any(all(name in line for name in names) for line in failed), result.stderr
    assert "OK" not in result.stdout
    return failed


def checks_run(result: Result) -> int:
    ok = sum(line.startswith("preflight: ok: ") for line in result.stdout.splitlines())
    failed = sum(line.startswith("preflight: FAIL: ") for line in result.stderr.splitlines())
    return ok + failed


# --- lint -----------------------------------------------------------------------------------


# shellcheck runs over every script, this one included, in tests/test_scripts.py.


def test_conventions() -> None:
    text = PREFLIGHT.read_text()
    lines = text.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert lines[1].startswith("# Usage: ")
    assert "\nset -euo pipefail\n" in text
    assert "shellcheck disable" not in text
    assert os.access(PREFLIGHT, os.X_OK), "the launchers run it directly"
    for var in ("GPUS_PER_NODE", "SHM_MIN_BYTES", "SHM_PATH", "RDMA_INTERFACES", "MEMLOCK_MIN_KB"):
        assert f"#   {var} " in text, f"{var} is not documented in the usage comment"


# --- healthy nodes --------------------------------------------------------------------------


def test_healthy_rdma_node_passes(node: Node) -> None:
    out = passes(preflight(node.env()))
    # GPUs, shm, memlock, 4 x (link, MTU, port), uverbs, GPUDirect RDMA, env file.
    assert out.splitlines()[-1] == "preflight: OK (18 checks)"
    assert "GPUs: 4 visible" in out
    assert "/dev/shm: 64 GiB >= 32 GiB" in out
    assert "CAP_IPC_LOCK is effective" in out
    assert "net3: RDMA device mlx5_8 port 1 ACTIVE" in out


def test_healthy_macvlan_node_passes(node: Node) -> None:
    # No PCI link from the macvlan netdev: the device is the one whose GID table names it.
    shutil.rmtree(node.sys)
    bring_up(macvlan_node(node.sys))
    out = passes(preflight(node.env()))
    assert "net4: RDMA device mlx5_9 port 1 ACTIVE" in out


def test_tcp_node_checks_only_gpus_and_shm(node: Node) -> None:
    # tcp / GKE GPUDirect: no RDMA_INTERFACES, so memlock, links, uverbs and env file are not
    # checked (here they would all fail).
    shutil.rmtree(node.sys)
    shutil.rmtree(node.dev / "infiniband")
    node.env_file.unlink()
    node.set_caps(CAPS_DEFAULT)
    env = {k: v for k, v in node.env().items() if k != "RDMA_INTERFACES"}
    assert passes(preflight(env)).splitlines()[-1] == "preflight: OK (2 checks)"


# --- GPUs -----------------------------------------------------------------------------------


def test_too_few_gpu_device_nodes(node: Node) -> None:
    node.set_gpus(3)
    fails(preflight(node.env()), "GPUs: 3 visible, GPUS_PER_NODE=4", "/dev")


def test_gpus_per_node_must_be_set(node: Node) -> None:
    env = {k: v for k, v in node.env().items() if k != "GPUS_PER_NODE"}
    fails(preflight(env), "GPUS_PER_NODE")


def test_nvidia_smi_is_preferred_over_device_nodes(node: Node) -> None:
    # 4 device nodes, but the driver lists only 3 GPUs (one fell off the bus).
    node.fake_nvidia_smi(3)
    fails(preflight(node.env()), "GPUs: 3 visible, GPUS_PER_NODE=4", "nvidia-smi")
    node.fake_nvidia_smi(4)
    assert "GPUs: 4 visible (nvidia-smi -L)" in passes(preflight(node.env()))


def test_mig_lines_are_not_counted_as_gpus(node: Node) -> None:
    node.fake_nvidia_smi(4, mig_per_gpu=2)
    assert "GPUs: 4 visible" in passes(preflight(node.env()))


def test_nvidia_smi_failure_is_reported(node: Node) -> None:
    node.fake(
        "nvidia-smi", 'echo "Failed to initialize NVML: Driver/library version mismatch"\nexit 18\n'
    )
    fails(preflight(node.env()), "nvidia-smi", "exit 18", "Driver/library version mismatch")


def test_nvidia_smi_that_never_answers_is_stopped_and_reported(node: Node) -> None:
    # As when a GPU falls off the bus: the driver never answers, nor does anything after it.
    node.fake("nvidia-smi", "sleep 600\n")
    env = {**node.env(), "NVIDIA_SMI_TIMEOUT_SECONDS": "1"}
    result = subprocess.run(
        [BASH, str(PREFLIGHT)], env=env, capture_output=True, text=True, timeout=120
    )
    fails(result, "'nvidia-smi -L' did not answer within 1s", "fallen off the bus")


# --- /dev/shm -------------------------------------------------------------------------------


def test_small_shm(node: Node) -> None:
    node.fake_df(64 * MIB)
    fails(
        preflight(node.env()),
        "/dev/shm: 64 MiB < 32 GiB; the pod's dshm memory volume is missing or too small",
    )


def test_shm_minimum_in_plain_bytes(node: Node) -> None:
    node.fake_df(64 * GIB)
    env = {**node.env(), "SHM_MIN_BYTES": str(64 * GIB)}
    assert "/dev/shm: 64 GiB >= 64 GiB" in passes(preflight(env))
    fails(preflight({**env, "SHM_MIN_BYTES": str(64 * GIB + 1)}), "/dev/shm: 64 GiB < 64 GiB")


def test_shm_check_is_skipped_without_a_minimum(node: Node) -> None:
    node.fake_df(64 * MIB)
    env = {k: v for k, v in node.env().items() if k != "SHM_MIN_BYTES"}
    out = passes(preflight(env))
    assert "/dev/shm" not in out and out.splitlines()[-1] == "preflight: OK (17 checks)"


def test_bad_shm_minimum(node: Node) -> None:
    fails(preflight({**node.env(), "SHM_MIN_BYTES": "32G"}), "SHM_MIN_BYTES='32G'")


def test_shm_measured_by_the_real_df(node: Node, tmp_path: Path) -> None:
    # The real df on a real directory: no filesystem is 4 EiB, every one is >= 1 byte.
    (node.bin / "df").unlink()
    (node.bin / "df").symlink_to(real_tool("df"))
    env = {**node.env(), "SHM_PATH": str(tmp_path)}
    passes(preflight({**env, "SHM_MIN_BYTES": "1"}))
    fails(preflight({**env, "SHM_MIN_BYTES": str(1 << 62)}), str(tmp_path), "< 4096 PiB")
    missing = str(tmp_path / "no-shm")
    fails(preflight({**env, "SHM_PATH": missing}), missing, "cannot measure")


# --- memlock --------------------------------------------------------------------------------


def test_low_memlock_without_ipc_lock_fails(node: Node) -> None:
    node.set_caps(CAPS_DEFAULT)
    fails(
        preflight(node.env(), memlock_kb=LOW_MEMLOCK_KB),
        f"memlock: ulimit -l is {LOW_MEMLOCK_KB} KiB (needed: unlimited)",
        "CAP_IPC_LOCK is not effective",
        "UID 0 with IPC_LOCK",
    )


@pytest.mark.parametrize(
    ("strategy", "fix"),
    [
        ("root-ipc-lock", "securityContext.runAsUser is 0"),
        ("machineconfig", "/etc/crio/crio.conf.d/99-gpu-cluster-memlock"),
        ("preconfigured", "set rdma.memlock to root-ipc-lock"),
    ],
)
def test_low_memlock_names_the_fix_for_the_stacks_strategy(
    node: Node, strategy: str, fix: str
) -> None:
    node.set_caps(CAPS_DEFAULT)
    env = {**node.env(), "MEMLOCK_STRATEGY": strategy}
    fails(preflight(env), "memlock", f"rdma.memlock is {strategy}", fix)


def test_low_memlock_under_machineconfig_names_the_shared_machine_config(node: Node) -> None:
    node.set_caps(CAPS_DEFAULT)
    env = {
        **node.env(),
        "MEMLOCK_STRATEGY": "machineconfig",
        "MEMLOCK_MACHINE_CONFIG": "99-gpu-gpu-cluster-memlock",
    }
    fails(preflight(env), "MachineConfig 99-gpu-gpu-cluster-memlock exists", "reference")


def test_low_memlock_with_ipc_lock_passes(node: Node) -> None:
    out = passes(preflight(node.env(), memlock_kb=LOW_MEMLOCK_KB))
    assert f"memlock: ulimit -l is {LOW_MEMLOCK_KB} KiB, but CAP_IPC_LOCK is effective" in out


def test_memlock_minimum_in_kib(node: Node) -> None:
    node.set_caps(CAPS_DEFAULT)
    env = {**node.env(), "MEMLOCK_MIN_KB": str(LOW_MEMLOCK_KB)}
    assert f"ulimit -l is {LOW_MEMLOCK_KB} KiB >= {LOW_MEMLOCK_KB} KiB" in passes(preflight(env))
    env["MEMLOCK_MIN_KB"] = str(LOW_MEMLOCK_KB + 1)
    fails(preflight(env), "memlock", f"needed: {LOW_MEMLOCK_KB + 1} KiB")


def test_unlimited_memlock_passes_without_ipc_lock(node: Node) -> None:
    # Raising the hard limit needs privilege, so bash's `ulimit` builtin is shadowed by an
    # exported function that answers as an unlimited container would.
    node.set_caps(CAPS_DEFAULT)
    env = {**node.env(), "BASH_FUNC_ulimit%%": "() {  echo unlimited\n}"}
    assert "memlock: ulimit -l is unlimited" in passes(preflight(env, memlock_kb=None))


def test_unreadable_capabilities_count_as_missing(node: Node) -> None:
    (node.proc / "self/status").unlink()
    fails(preflight(node.env()), "memlock", "CAP_IPC_LOCK is unknown", "status not readable")


# --- RDMA -----------------------------------------------------------------------------------


def test_interface_missing(node: Node) -> None:
    env = {**node.env(), "RDMA_INTERFACES": "net1,net2,net3,net4,net5"}
    fails(preflight(env), "net5: interface not found", "Multus")


def test_interface_without_rdma_device(node: Node) -> None:
    add_netdev(node.sys, "net5", ips=("10.1.1.1",))
    bring_up(node.sys)
    fails(
        preflight({**node.env(), "RDMA_INTERFACES": "net5"}),
        "net5: no RoCE v2 GID for its address (10.1.1.1)",
        "isRdma",
    )


def test_interface_without_ipv4_address(node: Node) -> None:
    (node.sys / ".ipv4/net2").unlink()
    fails(preflight(node.env()), "net2: no IPv4 address", "IPAM")


def test_missing_ip_tool_and_proc_net_is_one_problem_not_one_per_interface(node: Node) -> None:
    # No iproute2 and no readable /proc/net tables (node.proc has only self/status).
    env = {**node.env(), "IP_BIN": str(node.root / "no-such-ip")}
    failed = fails(preflight(env), "no-such-ip", "iproute2", "IP_BIN", "fib_trie")
    assert len(failed) == 1 and "no IPv4 address" not in failed[0], failed


def test_without_ip_a_healthy_node_passes_the_same_checks(node: Node) -> None:
    with_ip = passes(preflight(node.env()))
    assert passes(preflight(node.env_without_ip())) == with_ip
    assert "net4: RDMA device mlx5_9 port 1 ACTIVE" in with_ip


def test_without_ip_problems_are_reported_the_same(node: Node) -> None:
    add_netdev(node.sys, "net5", ips=("10.1.1.1",))
    bring_up(node.sys)
    set_port_state(node.sys, "mlx5_8", "1: DOWN")
    env = {"RDMA_INTERFACES": "net1,net2,net3,net4,net5", "RDMA_HCAS": ""}
    with_ip = preflight({**node.env(), **env})
    without = preflight({**node.env_without_ip(), **env})
    fails(without, "net5: no RoCE v2 GID for its address (10.1.1.1)")
    fails(without, "net3: RDMA device mlx5_8 port 1 is not ACTIVE")
    assert (without.stdout, without.stderr) == (with_ip.stdout, with_ip.stderr)


def test_without_ip_an_address_less_interface_names_where_it_looked(node: Node) -> None:
    (node.sys / ".ipv4/net2").unlink()
    fails(preflight(node.env_without_ip()), "net2: no IPv4 address", "net/fib_trie", "IPAM")


def test_mtu_other_than_the_stacks(node: Node) -> None:
    set_mtu(node.sys, "net3", 1500)
    failed = fails(preflight(node.env()), "net3: MTU 1500, expected 9000", "SriovNetworkNodePolicy")
    assert len(failed) == 1


def test_an_mtu_the_stack_does_not_state_is_reported_not_checked(node: Node) -> None:
    # The VFs' MTU is the SriovNetworkNodePolicy's (sriov-cni 1b7acc5 pkg/sriov/sriov.go never
    # sets a NAD's), which the program cannot know: without rdma.mtu nothing fails on it.
    set_mtu(node.sys, "net3", 1500)
    out = passes(preflight({**node.env(), "RDMA_MTU": ""}))
    assert "preflight: note: net3: MTU 1500 (not checked: set rdma.mtu" in out
    assert "preflight: note: net1: MTU 9000 (not checked" in out
    assert out.splitlines()[-1] == "preflight: OK (14 checks)"  # 18 less the 4 MTU checks


def test_link_down(node: Node) -> None:
    set_operstate(node.sys, "net2", "down")
    failed = fails(preflight(node.env()), "net2: link down (operstate=down)")
    assert len(failed) == 1


def test_port_not_active(node: Node) -> None:
    set_port_state(node.sys, "mlx5_8", "1: DOWN", phys_state="3: Disabled")
    fails(
        preflight(node.env()),
        "net3: RDMA device mlx5_8 port 1 is not ACTIVE",
        "state 1: DOWN",
        "phys_state 3: Disabled",
    )


def test_port_state_unreadable(node: Node) -> None:
    (node.sys / "class/infiniband/mlx5_6/ports/1/state").unlink()
    fails(preflight(node.env()), "net1", "mlx5_6", "not ACTIVE", "unreadable")


def test_no_uverbs(node: Node) -> None:
    shutil.rmtree(node.dev / "infiniband")
    fails(preflight(node.env()), f"no {node.dev}/infiniband/uverbs* device", "device-plugin")


def test_uverbs_of_one_hca_missing(node: Node) -> None:
    # sysfs names each HCA's verbs device; the device plugin injected all but mlx5_8's.
    for i, hca in enumerate(HCAS):
        add_verbs_link(node.sys, hca, f"uverbs{i}")
    passes(preflight(node.env()))
    (node.dev / "infiniband/uverbs2").unlink()
    fails(preflight(node.env()), "uverbs2", "mlx5_8", "net3")


def test_given_hcas_are_used(node: Node) -> None:
    env = {**node.env(), "RDMA_HCAS": ",".join(HCAS)}
    passes(preflight(env))
    env["RDMA_HCAS"] = "mlx5_6,mlx5_7,mlx5_8,mlx5_99"
    fails(preflight(env), "net4", "mlx5_99", "RDMA_HCAS")


def test_bad_interface_list(node: Node) -> None:
    fails(preflight({**node.env(), "RDMA_INTERFACES": "net1,,net2"}), "empty entry")


# --- DeepSpeed ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.14.5", "0.14.10", "0.16.4+cu124", "0.17.0rc1", "1.0.0"])
def test_deepspeed_with_no_ssh_passes(node: Node, version: str) -> None:
    node.fake_deepspeed(version)
    out = passes(preflight({**node.env(), "PREFLIGHT_LAUNCHER": "deepspeed"}))
    assert f"DeepSpeed: {version} (>= 0.14.5" in out


@pytest.mark.parametrize("version", ["0.14.4", "0.9.5"])
def test_deepspeed_older_than_no_ssh_fails(node: Node, version: str) -> None:
    node.fake_deepspeed(version)
    fails(preflight({**node.env(), "PREFLIGHT_LAUNCHER": "deepspeed"}), version, "--no_ssh")


def test_deepspeed_missing_fails(node: Node) -> None:
    node.fake_deepspeed(None)
    env = {**node.env(), "PREFLIGHT_LAUNCHER": "deepspeed"}
    fails(preflight(env), "DeepSpeed: not installed", "deepspeed>=0.14.5", "kind to torchrun")
    # Only checked for DeepSpeed's launcher.
    assert "DeepSpeed" not in passes(preflight({**env, "PREFLIGHT_LAUNCHER": "torchrun"}))


# --- NCCL env file --------------------------------------------------------------------------


def test_missing_nccl_env_file(node: Node) -> None:
    node.env_file.unlink()
    fails(preflight(node.env()), f"NCCL env file {node.env_file} missing", "detect-rdma")
    env = {k: v for k, v in node.env().items() if k != "RDMA_GID_INDEX"}  # unset = auto
    fails(preflight(env), str(node.env_file))


def test_empty_nccl_env_file(node: Node) -> None:
    node.env_file.write_text("")
    fails(preflight(node.env()), str(node.env_file), "empty")


def test_env_file_not_needed_with_fixed_gid_index_and_hcas(node: Node) -> None:
    node.env_file.unlink()
    env = {**node.env(), "RDMA_GID_INDEX": "3"}
    assert "NCCL env file" not in passes(preflight(env))
    # ...but it is when an HCA is still left to detection.
    fails(preflight({**env, "RDMA_HCAS": "mlx5_6,,mlx5_8,mlx5_9"}), str(node.env_file))


# --- everything at once ---------------------------------------------------------------------


def test_all_problems_are_reported(node: Node) -> None:
    node.set_gpus(3)
    node.fake_df(64 * MIB)
    node.set_caps(CAPS_DEFAULT)
    set_operstate(node.sys, "net2", "down")
    set_port_state(node.sys, "mlx5_8", "1: DOWN")
    (node.dev / "infiniband/uverbs0").unlink()
    add_verbs_link(node.sys, "mlx5_6", "uverbs0")
    node.env_file.unlink()
    env = {**node.env(), "RDMA_INTERFACES": "net1,net2,net3,net4,net5"}
    result = preflight(env)
    failed = fails(result, "GPUs: 3 visible")
    expected = [
        "GPUs: 3 visible, GPUS_PER_NODE=4",
        "/dev/shm: 64 MiB < 32 GiB",
        "memlock: ulimit -l is 64 KiB",
        "net2: link down",
        "net3: RDMA device mlx5_8 port 1 is not ACTIVE",
        "net5: interface not found",
        "uverbs0 (mlx5_6, net1)",
        f"NCCL env file {node.env_file} missing",
    ]
    assert len(failed) == len(expected), result.stderr
    for text, line in zip(expected, failed, strict=True):
        assert text in line, result.stderr
    assert result.stderr.splitlines()[-1] == "preflight: 8 of 19 checks failed"


# --- launchers ------------------------------------------------------------------------------


@pytest.fixture
def fake_trainer(node: Node) -> Path:
    """Stands in for torchrun/deepspeed: prints its argv."""
    fake = node.root / "fake-trainer"
    fake.write_text('#!/bin/sh\necho "trainer ran"\nfor arg in "$@"; do echo "$arg"; done\n')
    fake.chmod(0o755)
    return fake


class Launcher(NamedTuple):
    script: Path
    tool: str
    env: dict[str, str]


@pytest.fixture(params=["torchrun", "deepspeed"])
def launcher(request: pytest.FixtureRequest, node: Node, fake_trainer: Path) -> Launcher:
    """A launcher and its env for a 2-node job on the fake node, with PREFLIGHT=1."""
    env = {
        **node.env(),
        "PREFLIGHT": "1",
        "LAUNCH_PID_FILE": str(node.root / "launch.pid"),
        "NNODES": "2",
        "MASTER_ADDR": "train-0.train-headless",
        "MASTER_PORT": "29500",
    }
    if request.param == "torchrun":
        return Launcher(TORCHRUN, "torchrun", {**env, "TORCHRUN_BIN": str(fake_trainer)})
    hosts = node.root / "hostfile"
    hosts.write_text("train-0.train-headless slots=4\ntrain-1.train-headless slots=4\n")
    config = node.root / "ds_config.json"
    config.write_text("{}\n")
    node.fake_deepspeed("0.16.4")
    ds_env = {
        **env,
        "NODE_RANK": "1",
        "DEEPSPEED_HOSTFILE": str(hosts),
        "DEEPSPEED_CONFIG": str(config),
        "DEEPSPEED_BIN": str(fake_trainer),
    }
    return Launcher(DEEPSPEED, "deepspeed", ds_env)


def launch(launcher: Launcher, **env: str) -> Result:
    """Run the launcher with train.py under the low memlock limit (the node has IPC_LOCK)."""
    argv = [BASH, "-c", 'ulimit -S -l "$1" && exec "$0" "$2" "$3"', BASH, str(LOW_MEMLOCK_KB)]
    argv += [str(launcher.script), "train.py"]
    merged = {**launcher.env, **env}
    return subprocess.run(argv, env=merged, capture_output=True, text=True, check=False)


def test_launcher_runs_the_trainer_after_a_passing_preflight(launcher: Launcher) -> None:
    result = launch(launcher)
    assert result.returncode == 0, result.stderr
    # The trainer owns stdout; the preflight report goes to stderr.
    lines = result.stdout.splitlines()
    assert lines[0] == "trainer ran" and "train.py" in lines
    assert "preflight: " not in result.stdout
    # DeepSpeed's launcher also has its version checked.
    checks = 18 + (launcher.tool == "deepspeed")
    assert f"preflight: OK ({checks} checks)" in result.stderr.splitlines()


def test_launcher_stops_when_preflight_fails(launcher: Launcher, node: Node) -> None:
    node.set_gpus(3)
    set_operstate(node.sys, "net2", "down")
    result = launch(launcher)
    assert result.returncode == 1 and result.stdout == "", "the trainer must not start"
    assert "GPUs: 3 visible, GPUS_PER_NODE=4" in result.stderr
    assert "net2: link down" in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"launch-{launcher.tool}: error: preflight failed (exit 1); not starting {launcher.tool}"
    )


def test_launcher_passes_on_the_preflight_exit_code(launcher: Launcher, node: Node) -> None:
    custom = node.root / "my-preflight"
    custom.write_text("#!/bin/sh\necho custom check failed >&2\nexit 3\n")
    custom.chmod(0o755)
    result = launch(launcher, PREFLIGHT_BIN=str(custom))
    assert result.returncode == 3 and result.stdout == ""
    assert "custom check failed" in result.stderr and "exit 3" in result.stderr


def test_launcher_skips_preflight_unless_asked(launcher: Launcher, node: Node) -> None:
    node.set_gpus(0)  # would fail the preflight
    for value in ("0", ""):
        result = launch(launcher, PREFLIGHT=value)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("trainer ran\n") and "preflight: " not in result.stderr


def test_launcher_rejects_bad_preflight_settings(launcher: Launcher, node: Node) -> None:
    result = launch(launcher, PREFLIGHT="yes")
    assert result.returncode != 0 and "PREFLIGHT='yes'" in result.stderr and result.stdout == ""
    missing = str(node.root / "nope")
    result = launch(launcher, PREFLIGHT_BIN=missing)
    assert result.returncode != 0 and missing in result.stderr and result.stdout == ""
