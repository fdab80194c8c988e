"""Fake /sys trees that model a RoCE node, for the tests of scripts/detect-rdma.sh.

Only the files the script reads exist:

    class/net/<if>/                                   the netdev
    class/net/<if>/device/infiniband/<hca>/           PCI link (SR-IOV VF / host-device NIC)
    class/infiniband/<hca>/ports/<p>/gids/<i>         GID, e.g. 0000:...:ffff:c0a8:0203
    class/infiniband/<hca>/ports/<p>/gid_attrs/types/<i>   "IB/RoCE v1" or "RoCE v2"
    class/infiniband/<hca>/ports/<p>/gid_attrs/ndevs/<i>   netdev name

and, for scripts/preflight.sh (see `bring_up`, `set_port_state`, `add_verbs_link`):

    class/net/<if>/operstate                          "up", "down", ...
    class/net/<if>/mtu                                e.g. "9000"
    class/infiniband/<hca>/ports/<p>/state            e.g. "4: ACTIVE", "1: DOWN"
    class/infiniband/<hca>/ports/<p>/phys_state       e.g. "5: LinkUp", "3: Disabled"
    class/infiniband/<hca>/device/infiniband_verbs/uverbs<n>/   the HCA's verbs device

The interfaces' IPv4 addresses live outside sysfs; `fake_ip` writes a stand-in for iproute2's
`ip -4 -o addr show dev <if>` that prints what `add_netdev(..., ips=...)` recorded, and
`fake_proc_net` the kernel's own tables the scripts read instead when the image has no `ip`:

    <proc>/net/fib_trie                               every address as a "/32 host LOCAL" leaf
    <proc>/net/route                                  each address's connected /24, plus a
                                                      default route and one via a gateway

In containers, reading an unmapped GID entry fails with EINVAL. Tests may run as root, where
chmod 000 does not block reads, so an unreadable entry is a directory (read fails with EISDIR) or a
dangling symlink (ENOENT) instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROCE_V1 = "IB/RoCE v1"
ROCE_V2 = "RoCE v2"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


@dataclass(frozen=True)
class Gid:
    """One GID table entry; None for a field means reading it fails."""

    gid: str | None
    type: str | None
    ndev: str | None


UNREADABLE = Gid(None, None, None)


def ipv4_gid(ip: str) -> str:
    """The IPv4-mapped GID the kernel shows for `ip` (::ffff:a.b.c.d, fully expanded)."""
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a << 8 | b:04x}:{c << 8 | d:04x}"


def link_local_gid(n: int) -> str:
    return f"fe80:0000:0000:0000:0000:00ff:fe00:{n:04x}"


def sriov_table(iface: str, ip: str, v2_index: int = 3, size: int = 6) -> dict[int, Gid]:
    """A VF's port-1 table: link-local v1/v2 at 0/1, IPv4 v1 at v2_index-1, IPv4 v2 at v2_index,
    and every other slot unmapped (unreadable) or zero."""
    table: dict[int, Gid] = {i: UNREADABLE for i in range(size)}
    table[0] = Gid(link_local_gid(1), ROCE_V1, iface)
    table[1] = Gid(link_local_gid(1), ROCE_V2, iface)
    table[v2_index - 1] = Gid(ipv4_gid(ip), ROCE_V1, iface)
    table[v2_index] = Gid(ipv4_gid(ip), ROCE_V2, iface)
    if size - 1 not in (v2_index, v2_index - 1):
        # An unused slot: the GID reads as zeros but its attributes fail.
        table[size - 1] = Gid(ZERO_GID, None, None)
    return table


def macvlan_table(iface: str, ip: str, host_ip: str = "10.0.0.5") -> dict[int, Gid]:
    """A shared HCA seen from a macvlan pod: the host PF's GIDs come first (their netdev lives in
    another namespace, so ndevs fails), the pod's own RoCE v2 IPv4 GID sits at index 5."""
    return {
        0: Gid(link_local_gid(0x10), ROCE_V1, None),
        1: Gid(link_local_gid(0x10), ROCE_V2, None),
        2: Gid(ipv4_gid(host_ip), ROCE_V1, None),
        3: Gid(ipv4_gid(host_ip), ROCE_V2, None),
        4: Gid(ipv4_gid(ip), ROCE_V1, iface),
        5: Gid(ipv4_gid(ip), ROCE_V2, iface),
        6: Gid(link_local_gid(0x20), ROCE_V2, iface),
        7: UNREADABLE,
    }


def _write(path: Path, value: str | None, *, as_dir: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if value is not None:
        path.write_text(value + "\n")
    elif as_dir:
        path.mkdir()
    else:
        path.symlink_to(path.parent / f".missing-{path.name}")


_ADDRS = ".ipv4"  # beside class/: <root>/.ipv4/<if> holds the interface's addresses


def add_netdev(root: Path, iface: str, hca: str | None = None, ips: tuple[str, ...] = ()) -> None:
    """A netdev with IPv4 addresses `ips`; with `hca`, also the PCI link to its RDMA device."""
    net = root / "class/net" / iface
    net.mkdir(parents=True, exist_ok=True)
    if hca is not None:
        (net / "device/infiniband" / hca).mkdir(parents=True, exist_ok=True)
    if ips:
        (root / _ADDRS).mkdir(exist_ok=True)
        (root / _ADDRS / iface).write_text("".join(f"{ip}\n" for ip in ips))


def fake_ip(root: Path) -> Path:
    """An `ip` that answers `ip -4 -o addr show dev <if>` from the addresses add_netdev kept,
    in iproute2's one-line format, and fails like iproute2 for an unknown device."""
    script = root.parent / f"{root.name}-ip"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'[[ "$*" == "-4 -o addr show dev "* ]] || exit 2\n'
        "iface=${*: -1}\n"
        f'[[ -e "{root}/class/net/$iface" ]] ||\n'
        '  { echo "Device \\"$iface\\" does not exist." >&2; exit 1; }\n'
        f'[[ -f "{root}/{_ADDRS}/$iface" ]] || exit 0\n'
        "while read -r addr; do\n"
        '  echo "7: $iface    inet $addr/24 brd 0.0.0.0 scope global $iface\\'
        '       valid_lft forever preferred_lft forever"\n'
        f'done <"{root}/{_ADDRS}/$iface"\n'
    )
    script.chmod(0o755)
    return script


def _route_hex(ip: str) -> str:
    """An address as /proc/net/route prints it on a little-endian CPU (bytes reversed)."""
    return "".join(f"{int(x):02X}" for x in reversed(ip.split(".")))


def _network(ip: str) -> str:
    return ".".join([*ip.split(".")[:3], "0"])


def fake_proc_net(proc: Path, root: Path) -> Path:
    """<proc>/net/fib_trie and <proc>/net/route of a pod whose interfaces have the addresses
    add_netdev recorded under sysfs `root`, each with its /24, laid out as the kernel prints
    them (torvalds/linux net/ipv4/fib_trie.c fib_trie_seq_show, fib_route_seq_show): the main
    table's leaves, then the local table's with lo's 127.0.0.1 (which has no route in main);
    in route, a default via eth0's gateway and a route via a gateway on the first interface,
    neither of which holds an address."""
    addrs: dict[str, list[str]] = {}
    if (root / _ADDRS).is_dir():
        for f in sorted((root / _ADDRS).iterdir()):
            addrs[f.name] = f.read_text().split()
    leaves: dict[str, list[str]] = {"0.0.0.0": ["/0 universe UNICAST"]}
    local: dict[str, list[str]] = {"127.0.0.0": ["/8 host LOCAL"], "127.0.0.1": ["/32 host LOCAL"]}
    width = 127  # each route line is padded to 127 characters
    head = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"
    routes = [head.ljust(width)]

    def route(iface: str, dest: str, gw: str, flags: int, mask: str) -> None:
        line = f"{iface}\t{dest}\t{gw}\t{flags:04X}\t0\t0\t0\t{mask}\t0\t0\t0"
        routes.append(line.ljust(width))

    for iface, ips in addrs.items():
        if iface == "eth0":
            route(iface, "00000000", _route_hex(_network(ips[0])[:-1] + "1"), 0x3, "00000000")
        for ip in ips:
            net = _network(ip)
            broadcast = net[:-1] + "255"
            for table in (leaves, local):
                table.setdefault(net, []).append("/24 link UNICAST")
                table.setdefault(ip, []).append("/32 host LOCAL")
                table.setdefault(broadcast, []).append("/32 link BROADCAST")
            route(iface, _route_hex(net), "00000000", 0x1, "00FFFFFF")
    first = next((i for i in addrs if i != "eth0"), None)
    if first is not None:
        gateway = _route_hex(_network(addrs[first][0])[:-1] + "1")
        route(first, _route_hex("192.168.77.0"), gateway, 0x3, "00FFFFFF")

    def trie(name: str, table: dict[str, list[str]]) -> list[str]:
        out = [f"{name}:", "  +-- 0.0.0.0/0 3 0 5"]
        for ip in sorted(table, key=lambda ip: tuple(int(x) for x in ip.split("."))):
            out.append(f"     |-- {ip}")
            out += [f"        {alias}" for alias in table[ip]]
        return out

    net_dir = proc / "net"
    net_dir.mkdir(parents=True, exist_ok=True)
    (net_dir / "fib_trie").write_text("\n".join(trie("Main", leaves) + trie("Local", local)) + "\n")
    (net_dir / "route").write_text("\n".join(routes) + "\n")
    return proc


def add_hca(root: Path, hca: str, table: dict[int, Gid], port: int = 1) -> None:
    base = root / "class/infiniband" / hca / "ports" / str(port)
    (base / "gids").mkdir(parents=True, exist_ok=True)
    for i, entry in table.items():
        _write(base / "gids" / str(i), entry.gid, as_dir=True)
        _write(base / "gid_attrs/types" / str(i), entry.type, as_dir=False)
        _write(base / "gid_attrs/ndevs" / str(i), entry.ndev, as_dir=False)


IFACES = ("net1", "net2", "net3", "net4")
HCAS = ("mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9")


def sriov_node(
    root: Path, v2_index: dict[str, int] | None = None, ifaces: tuple[str, ...] = IFACES
) -> Path:
    """net1..net4 (or `ifaces`) -> mlx5_6..mlx5_9 (PCI-linked), RoCE v2 IPv4 GID at 3 unless
    overridden. Also a host-side mlx5_0 that belongs to no pod interface."""
    for n, (iface, hca) in enumerate(zip(ifaces, HCAS[: len(ifaces)], strict=True), start=1):
        add_netdev(root, iface, hca, ips=(pod_ip(n),))
        idx = (v2_index or {}).get(iface, 3)
        add_hca(root, hca, sriov_table(iface, pod_ip(n), v2_index=idx))
    add_netdev(root, "eth0", ips=("10.128.0.7",))
    add_hca(root, "mlx5_0", sriov_table("ens1f0np0", "10.0.0.5"))
    return root


def macvlan_node(root: Path) -> Path:
    """net1..net4 are macvlans on shared HCAs: no PCI link, RoCE v2 IPv4 GID at index 5."""
    for n, (iface, hca) in enumerate(zip(IFACES, HCAS, strict=True), start=1):
        add_netdev(root, iface, ips=(pod_ip(n),))
        add_hca(root, hca, macvlan_table(iface, pod_ip(n), host_ip=f"10.0.{n}.5"))
    return root


def pod_ip(n: int, pod: int = 10) -> str:
    """The address whereabouts gives pod `pod` on RDMA network `n` (1-based)."""
    return f"192.168.{n}.{pod}"


def add_other_pod(root: Path, pod: int, first_index: int) -> None:
    """Another pod's macvlans on the same shared HCAs, also named net1..net4 (the kernel's
    gid_attrs/ndevs shows names from every namespace), its GIDs at lower indices than ours."""
    for n, (iface, hca) in enumerate(zip(IFACES, HCAS, strict=True), start=1):
        base = root / "class/infiniband" / hca / "ports/1"
        for offset, kind in enumerate((ROCE_V1, ROCE_V2)):
            idx = str(first_index + offset)
            (base / "gids" / idx).write_text(ipv4_gid(pod_ip(n, pod)) + "\n")
            (base / "gid_attrs/types" / idx).write_text(kind + "\n")
            (base / "gid_attrs/ndevs" / idx).write_text(iface + "\n")


def set_operstate(root: Path, iface: str, state: str) -> None:
    (root / "class/net" / iface / "operstate").write_text(state + "\n")


def set_port_state(
    root: Path, hca: str, state: str, phys_state: str = "5: LinkUp", port: int = 1
) -> None:
    base = root / "class/infiniband" / hca / "ports" / str(port)
    base.mkdir(parents=True, exist_ok=True)
    (base / "state").write_text(state + "\n")
    (base / "phys_state").write_text(phys_state + "\n")


def add_verbs_link(root: Path, hca: str, uverbs: str) -> None:
    """Name the HCA's verbs character device (uverbs<n>), as the PCI device dir does."""
    (root / "class/infiniband" / hca / "device/infiniband_verbs" / uverbs).mkdir(parents=True)


def set_mtu(root: Path, iface: str, mtu: int) -> None:
    (root / "class/net" / iface / "mtu").write_text(f"{mtu}\n")


def bring_up(root: Path, mtu: int = 9000) -> Path:
    """Every netdev operstate up with `mtu`, every port of every RDMA device ACTIVE / LinkUp."""
    for net in (root / "class/net").iterdir():
        set_operstate(root, net.name, "up")
        set_mtu(root, net.name, mtu)
    for ports in (root / "class/infiniband").glob("*/ports"):
        for port in ports.iterdir():
            set_port_state(root, ports.parent.name, "4: ACTIVE", port=int(port.name))
    return root
