"""Multus on the real nodes (issue #39): the thin plugin as each node's CNI, the node's bridge
network (noderuntime.cni_config) its cluster network, so a pod's
`k8s.v1.cni.cncf.io/networks` annotation attaches the NetworkAttachmentDefinitions it names as
net1, net2 ... beside eth0; macvlan (containernetworking/plugins) and whereabouts, the IPAM the
stack's NADs name, are its delegates.

Multus and whereabouts reach the API server as their own users, with the ClusterRoles their
install manifests give their node agents (build.MULTUS_DATA), bound to those users here.

whereabouts reads its kubeconfig only from a host-wide file (pkg/config/config.go GetFlatIPAM:
/etc/cni/net.d/whereabouts.d/whereabouts.conf and two more fixed paths, or a
`configuration_path` the NAD would have to name): one tier with Multus runs on a host at a time,
holding a lock while the file is its own.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from tools.realtier.build import Tools
from tools.realtier.controlplane import ControlPlane
from tools.realtier.kube import Kube, install_crds, wait_for

# whereabouts v0.9.2 pkg/config/config.go GetFlatIPAM: the first of its fixed flat-file paths.
WHEREABOUTS_FLAT_FILE = Path("/etc/cni/net.d/whereabouts.d/whereabouts.conf")
_LOCK = Path("/run/gpu-cluster-realtier/whereabouts.lock")
# The binaries the nodes' CNI runs: the bridge network's, macvlan, Multus and whereabouts.
_PLUGINS = ("bridge", "loopback", "host-local", "portmap", "macvlan", "multus", "whereabouts")
# The node agents' ClusterRoles in their install manifests (build.MULTUS_DATA), and the user
# each runs as here (the certificate's common name).
_AGENTS = {
    "multus-daemonset.yml": ("multus", "system:multus"),
    "daemonset-install.yaml": ("whereabouts-cni", "system:whereabouts"),
}
_WHEREABOUTS_CRDS = (
    "whereabouts.cni.cncf.io_ippools.yaml",
    "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml",
)


@dataclass
class Multus:
    """`start()` before the nodes' containerd, `stop()` after it."""

    tools: Tools
    plane: ControlPlane
    workdir: Path
    _kubeconfigs: dict[str, Path] = field(default_factory=dict)
    _lock: IO[str] | None = None
    _owns_flat_file: bool = False

    @property
    def bin_dir(self) -> Path:
        return self.workdir / "cni-bin"

    def start(self, kube: Kube) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        data = self.tools.data("multus")
        install_crds(kube, [data[name] for name in _WHEREABOUTS_CRDS])
        for manifest, (role, user) in _AGENTS.items():
            documents = yaml.safe_load_all(data[manifest].read_text(encoding="utf-8"))
            (cluster_role,) = (
                d
                for d in documents
                if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == role
            )
            kube.create(cluster_role)
            kube.create(_binding(role, user))
            client = self.plane.ca.issue(role, user)
            self._kubeconfigs[role] = self.plane.kubeconfig_for(
                self.workdir / f"{role}.kubeconfig", client
            )
        self.bin_dir.mkdir()
        for plugin in _PLUGINS:
            (self.bin_dir / plugin).symlink_to(self.tools.binary(plugin))
        self._own_flat_file()

    def _own_flat_file(self) -> None:
        _LOCK.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _LOCK.open("w")
        wait_for(
            f"the host's whereabouts flat file ({_LOCK} held by another tier)",
            self._try_lock,
            deadline_s=600,
        )
        WHEREABOUTS_FLAT_FILE.parent.mkdir(parents=True, exist_ok=True)
        flat = {
            "datastore": "kubernetes",
            "kubernetes": {"kubeconfig": str(self._kubeconfigs["whereabouts-cni"])},
            "log_file": str(self.workdir / "whereabouts.log"),
            "log_level": "debug",
        }
        WHEREABOUTS_FLAT_FILE.write_text(json.dumps(flat), encoding="utf-8")
        self._owns_flat_file = True

    def _try_lock(self) -> bool:
        assert self._lock is not None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def cni_config(self, cluster_network: dict[str, Any], node_dir: Path) -> dict[str, Any]:
        """The thin plugin's configuration (multus-cni v4.3.0 docs/configuration.md) for one
        node: `cluster_network` as its delegate (eth0), its cache below the node's directory."""
        return {
            "cniVersion": "1.0.0",
            "name": "multus-cni-network",
            "type": "multus",
            "kubeconfig": str(self._kubeconfigs["multus"]),
            "cniDir": str(node_dir / "multus"),
            "binDir": str(self.bin_dir),
            "logFile": str(node_dir / "multus.log"),
            "logLevel": "verbose",
            "logToStderr": False,
            "delegates": [cluster_network],
        }

    def stop(self) -> None:
        if self._owns_flat_file:
            WHEREABOUTS_FLAT_FILE.unlink(missing_ok=True)
            self._owns_flat_file = False
        if self._lock is not None:
            self._lock.close()  # releases the lock
            self._lock = None


def _binding(role: str, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"realnodes:{role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
