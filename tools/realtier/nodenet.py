"""The real nodes' network: a Linux bridge on the host as the nodes' LAN (the API server and the
cluster DNS listen on its address) and, per node, a network namespace joined to it by a veth
pair. Each node's pods get a subnet of their own on the node's CNI bridge; every node routes the
other nodes' pod subnets to those nodes over the LAN, as flannel's host-gw backend does
(flannel-io/flannel pkg/backend/hostgw), so pod-to-pod traffic leaves one node's namespace and
enters another's. The host routes each pod subnet to its node (cluster DNS answers pods).

A network takes one of `_SLOTS` address slots, claimed by a file under /run (several test
workers run at once); a slot whose claimant is dead is taken over once nothing of it is left.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

_SLOT_DIR = Path("/run/gpu-cluster-realtier/node-networks")
# 10.200.0.0/16 .. 10.231.0.0/16: none of the tier's other ranges (services 10.96.0.0/16, kwok's
# pods 10.244.0.0/16).
_SLOTS = 32
_FIRST_OCTET2 = 200
# Where `ip netns` keeps named network namespaces (ip-netns(8)).
_NETNS_DIR = Path("/var/run/netns")


def _ip(*args: str, netns: str | None = None) -> None:
    command = ["ip", *(["-n", netns] if netns else []), *args]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class NodeNetwork:
    """Addresses and names of one slot: `up()` makes them, `down()` removes them."""

    slot: int
    nodes: int
    # NIC name -> the host bridge its links are on (add_nic).
    rails: dict[str, str] = field(default_factory=dict)

    @classmethod
    def claim(cls, nodes: int) -> NodeNetwork:
        """The first slot no live process holds, no address on the host overlaps and none of
        whose links or namespaces is left (a namespace whose name is gone lives on, with its
        veth's host end, while a process is in it). Under a host-wide lock: a dead claimant's
        file is removed and a new one written by one worker at a time."""
        _SLOT_DIR.mkdir(parents=True, exist_ok=True)
        routes = subprocess.run(
            ["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True
        ).stdout
        names = os.listdir("/sys/class/net") + (
            os.listdir(_NETNS_DIR) if _NETNS_DIR.is_dir() else []
        )
        with (_SLOT_DIR / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for slot in range(_SLOTS):
                claim = _SLOT_DIR / str(slot)
                with contextlib.suppress(FileNotFoundError, ValueError):
                    if not _alive(int(claim.read_text())):
                        claim.unlink()
                if f"10.{_FIRST_OCTET2 + slot}." in routes or claim.exists():
                    continue
                bridge, own = f"rnbr{slot}", (f"rn{slot}n", f"rn{slot}r")
                if any(name == bridge or name.startswith(own) for name in names):
                    continue
                claim.write_text(str(os.getpid()))
                return cls(slot, nodes)
        raise RuntimeError(f"all {_SLOTS} real-node network slots are taken ({_SLOT_DIR})")

    @property
    def _prefix(self) -> str:
        return f"10.{_FIRST_OCTET2 + self.slot}"

    @property
    def gateway(self) -> str:
        """The host's address on the nodes' LAN."""
        return f"{self._prefix}.0.1"

    @property
    def cluster_cidr(self) -> str:
        return f"{self._prefix}.0.0/16"

    @property
    def bridge(self) -> str:
        return f"rnbr{self.slot}"

    def node_ip(self, index: int) -> str:
        return f"{self._prefix}.0.{10 + index}"

    def pod_subnet(self, index: int) -> str:
        return f"{self._prefix}.{index + 1}.0/24"

    def netns(self, index: int) -> str:
        return f"rn{self.slot}n{index}"

    def enter(self, index: int, command: list[str]) -> list[str]:
        """`command` run in node `index`'s network namespace, in the host's mount namespace (so
        its mounts are the ones kubelet and containerd share; `ip netns exec` would not)."""
        return ["nsenter", f"--net={_NETNS_DIR / self.netns(index)}", *command]

    def up(self) -> None:
        try:
            self._up()
        except BaseException:
            self.down()
            raise

    def _up(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for index in range(self.nodes):
            netns = self.netns(index)
            _ip("netns", "add", netns)
            host_end = f"{netns}h"
            _ip("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", netns)
            _ip("link", "set", host_end, "master", self.bridge, "up")
            _ip("addr", "add", f"{self.node_ip(index)}/24", "dev", "eth0", netns=netns)
            _ip("link", "set", "lo", "up", netns=netns)
            _ip("link", "set", "eth0", "up", netns=netns)
            _ip("route", "add", "default", "via", self.gateway, netns=netns)
            for other in range(self.nodes):
                if other != index:
                    subnet, via = self.pod_subnet(other), self.node_ip(other)
                    _ip("route", "add", subnet, "via", via, netns=netns)
            _ip("route", "add", self.pod_subnet(index), "via", self.node_ip(index))
            # A node forwards between its pods and the LAN (per namespace: the host's is untouched).
            forward = subprocess.run(
                self.enter(index, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]), capture_output=True
            )
            if forward.returncode != 0:
                raise RuntimeError(f"ip_forward in {netns}: {forward.stderr.decode()}")

    def add_nic(self, index: int, name: str) -> None:
        """A link named `name` in node `index`'s namespace, standing where a NIC of that name
        would (a parent for macvlans): one end of a veth pair whose other end is on a host
        bridge of its own per name, so the nodes' links of one name share a segment, as one
        rail's NICs share a switch. (No dummy links: this kernel has no dummy driver.)"""
        if name not in self.rails:
            bridge = f"rn{self.slot}r{len(self.rails)}"
            _ip("link", "add", bridge, "type", "bridge")
            _ip("link", "set", bridge, "up")
            self.rails[name] = bridge
        netns = self.netns(index)
        host_end = f"{netns}r{list(self.rails).index(name)}"
        _ip("link", "add", host_end, "type", "veth", "peer", "name", name, "netns", netns)
        _ip("link", "set", host_end, "master", self.rails[name], "up")
        _ip("link", "set", name, "up", netns=netns)

    def down(self) -> None:
        """Remove the namespaces (their veths go with them), the bridges (the LAN's routes go
        with it) and the claim; what was never made is skipped."""
        for index in range(self.nodes):
            if (_NETNS_DIR / self.netns(index)).exists():
                subprocess.run(["ip", "netns", "del", self.netns(index)], capture_output=True)
        for bridge in (self.bridge, *self.rails.values()):
            if Path(f"/sys/class/net/{bridge}").exists():
                subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        with contextlib.suppress(FileNotFoundError):
            (_SLOT_DIR / str(self.slot)).unlink()
