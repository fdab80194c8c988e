"""Real nodes beside kwok's: per node a containerd (runc, the CNI bridge), a kubelet and a
kube-proxy built from the tier's Kubernetes release, in the node's own network namespace
(nodenet.py), registered
with a ControlPlane that listens on the nodes' LAN; CoreDNS with the kubernetes plugin answers
the cluster's names on the LAN's host address. Pods on them really run.

Each node keeps everything of its own: containerd's root, state, socket and runc root; the
kubelet's root directory, pod logs, port and cgroup root (two kubelets must not share
/kubepods); the CNI configuration and host-local's address store. `stop()` ends the kubelets,
kills what runs in the nodes' cgroups, stops containerd and its shims, unmounts everything under
the nodes' directories and removes the cgroups and namespaces.

The kubelet changes a few host-wide kernel settings as on any node (vm.overcommit_memory,
kernel.panic, kernel.panic_on_oops: pkg/kubelet/cm/container_manager_linux.go
setupKernelTunables with protectKernelDefaults off).
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools.realtier.build import Tools
from tools.realtier.controlplane import CLUSTER_DOMAIN, ControlPlane, free_port, tool_env
from tools.realtier.controlplane import _die_with_parent as die_with_parent
from tools.realtier.images import ImageArchive
from tools.realtier.kube import Kube, Object, wait_for
from tools.realtier.mounts import unmount_under
from tools.realtier.nodemultus import Multus
from tools.realtier.nodenet import NodeNetwork
from tools.realtier.noderuntime import (
    cni_config,
    containerd_config,
    frozen_pod,
    kill_cgroup,
    kill_shims,
    kube_proxy_config,
    make_cgroup,
    remove_cgroup,
    remove_container_log_links,
    terminate,
)
from tools.realtier.nodeseed import plant, seed_root

# The kubelet's default ports (KubeletConfiguration port, healthzPort): each node has its own
# network namespace, so every node uses them.
_KUBELET_PORT = 10250
_KUBELET_HEALTHZ_PORT = 10248
# kube-proxy's default healthzBindAddress port (pkg/proxy/apis/config/v1alpha1 defaults.go): it
# answers 200 once the proxier has synced its rules.
_KUBE_PROXY_HEALTHZ_PORT = 10256


@dataclass(frozen=True)
class NodeSpec:
    """A real node's name, labels and taints, the extended resources it advertises, and the
    NICs it has (links in its namespace: nodenet.add_nic), e.g. those a NAD names as master."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    extended_resources: dict[str, str] = field(default_factory=dict)
    nics: tuple[str, ...] = ()


@dataclass
class _Node:
    spec: NodeSpec
    index: int
    directory: Path
    containerd: subprocess.Popen[bytes] | None = None
    kubelet: subprocess.Popen[bytes] | None = None
    kube_proxy: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        return self.directory / "containerd" / "containerd.sock"

    @property
    def pod_logs(self) -> Path:
        return self.directory / "pod-logs"

    @property
    def cgroup_root(self) -> str:
        return f"realnodes-{self.directory.parent.name}-{self.index}"


@dataclass
class RealNodes:
    """Start with `start()` (or as a context manager) after the plane; stop before it."""

    tools: Tools
    plane: ControlPlane
    network: NodeNetwork
    specs: Sequence[NodeSpec]
    images: Sequence[ImageArchive]
    sandbox_image: ImageArchive
    # Short (containerd's socket path must fit a socket address, 108 bytes).
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="rn-")))
    log: Callable[[str], None] = lambda _message: None
    # Multus as the nodes' CNI (nodemultus.py); needs the multus and whereabouts families.
    multus: bool = False
    _nodes: list[_Node] = field(default_factory=list)
    _multus: Multus | None = None

    def __enter__(self) -> RealNodes:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        started = time.monotonic()
        kube = Kube(self.plane.kubeconfig)
        # The kubelets' rights: the system:node role (the control plane runs RBAC only, without
        # the Node authorizer that grants them on a cluster) for the system:nodes group.
        kube.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "realnodes:system:node"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:node",
                },
                "subjects": [
                    {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Group",
                        "name": "system:nodes",
                    }
                ],
            }
        )
        self._start_coredns()
        if self.multus:
            self._multus = Multus(self.tools, self.plane, self.workdir / "multus")
            self._multus.start(kube)
        seed = seed_root((self.sandbox_image, *self.images))
        for index, spec in enumerate(self.specs):
            node = _Node(spec, index, self.workdir / f"node-{index}")
            self._nodes.append(node)
            node.directory.mkdir(parents=True)
            make_cgroup(node.cgroup_root)
            for link in spec.nics:
                self.network.add_nic(index, link)
            self._start_containerd(node, seed)
        for node in self._nodes:
            self._start_kubelet(node)
        for node in self._nodes:
            wait_for(
                f"node {node.spec.name} Ready",
                functools.partial(_ready, kube, node.spec.name),
                explain=functools.partial(self.log_tail, node.index, "kubelet"),
            )
            if node.spec.extended_resources:
                # Kubernetes docs, "Advertise Extended Resources for a Node": a patch of the
                # node's status capacity; the kubelet carries it into allocatable.
                kube.patch_status(
                    "v1", "Node", node.spec.name, None, {"capacity": node.spec.extended_resources}
                )
                wait_for(
                    f"node {node.spec.name} to offer {node.spec.extended_resources}",
                    functools.partial(_allocatable, kube, node.spec),
                )
            self._start_kube_proxy(node)
        for node in self._nodes:
            healthz = (
                f"http://{self.network.node_ip(node.index)}:{_KUBE_PROXY_HEALTHZ_PORT}/healthz"
            )
            wait_for(
                f"{node.spec.name}'s kube-proxy synced",
                functools.partial(_answers, healthz),
                explain=functools.partial(self.log_tail, node.index, "kube-proxy"),
            )
        self.log(f"{len(self._nodes)} real nodes up in {time.monotonic() - started:.0f} s")

    # --- cluster DNS -------------------------------------------------------------------------

    def _start_coredns(self) -> None:
        ready_port = free_port()
        corefile = self.workdir / "Corefile"
        self.workdir.mkdir(parents=True, exist_ok=True)
        # The kubernetes plugin as kubeadm's Corefile sets it (cmd/kubeadm/app/phases/addons/dns/
        # manifests.go), reading the API server with the admin's kubeconfig.
        corefile.write_text(
            f""".:53 {{
    bind {self.network.gateway}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {self.plane.kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    cache 30
}}
""",
            encoding="utf-8",
        )
        self.plane.spawn("coredns", [str(self.tools.binary("coredns")), "-conf", str(corefile)])
        self.plane.wait_http("coredns", f"http://127.0.0.1:{ready_port}/ready")

    # --- containerd --------------------------------------------------------------------------

    def _start_containerd(self, node: _Node, seed: Path) -> None:
        """containerd on the node's own root, which starts as `seed` (the images imported)."""
        cni = node.directory / "cni"
        cni.mkdir()
        network = cni_config(self.network.pod_subnet(node.index), node.directory / "ipam")
        cni_bin = self.tools.binary("bridge").parent
        if self._multus is None:
            (cni / "10-realnodes.conflist").write_text(json.dumps(network))
        else:
            multus = self._multus.cni_config(network, node.directory)
            (cni / "00-multus.conf").write_text(json.dumps(multus))
            cni_bin = self._multus.bin_dir
        base = node.directory / "containerd"
        base.mkdir()
        plant(seed, base / "root")
        config = base / "config.toml"
        config.write_text(
            containerd_config(base, node.socket, self.sandbox_image.name, cni_bin, cni),
            encoding="utf-8",
        )
        node.containerd = self._spawn(node, "containerd", ["containerd", "--config", str(config)])
        wait_for(f"{node.spec.name}'s containerd socket", node.socket.exists, deadline_s=60)

    # --- kubelet -----------------------------------------------------------------------------

    def _start_kubelet(self, node: _Node) -> None:
        ip = self.network.node_ip(node.index)
        kubelet_dir = node.directory / "kubelet"
        pki = kubelet_dir / "pki"
        pki.mkdir(parents=True)
        ca = self.plane.ca
        # Who the node is (Kubernetes "Using Node Authorization": system:node:<name> in
        # system:nodes), and the pair it serves its API with, for the API server to verify.
        client = ca.issue(
            f"{node.spec.name}-client",
            f"system:node:{node.spec.name}",
            organizations=("system:nodes",),
        )
        serving = ca.issue(
            f"{node.spec.name}-serving",
            node.spec.name,
            server=True,
            dns_names=(node.spec.name,),
            ip_addresses=(ip,),
        )
        kubeconfig = self.plane.kubeconfig_for(kubelet_dir / "kubeconfig", client)
        resolv = kubelet_dir / "resolv.conf"
        resolv.write_text(f"nameserver {self.network.gateway}\n")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": ip,
            "port": _KUBELET_PORT,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": _KUBELET_HEALTHZ_PORT,
            "tlsCertFile": str(serving.cert),
            "tlsPrivateKeyFile": str(serving.key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(ca.cert_path)},
            },
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{node.socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{node.cgroup_root}",
            # KEP-5573 (kubernetes#134298): from 1.35 the kubelet refuses cgroup v1 unless told.
            "failCgroupV1": False,
            "clusterDNS": [self.network.gateway],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(resolv),
            "podLogsDir": str(node.pod_logs),
            "failSwapOn": False,
            # A shared test machine's disk and memory are not the node's to reclaim: no image
            # GC, and evictions only when nearly nothing is left.
            "imageGCHighThresholdPercent": 100,
            "evictionHard": {
                "memory.available": "50Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "serializeImagePulls": False,
            "registerWithTaints": list(node.spec.taints),
        }
        config_path = kubelet_dir / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        labels = ",".join(f"{k}={v}" for k, v in node.spec.labels.items())
        node.kubelet = self._spawn(
            node,
            "kubelet",
            [
                str(self.tools.binary("kubelet")),
                f"--config={config_path}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={kubelet_dir / 'root'}",
                f"--hostname-override={node.spec.name}",
                f"--node-ip={ip}",
                *([f"--node-labels={labels}"] if labels else []),
            ],
        )

    # --- kube-proxy --------------------------------------------------------------------------

    def _start_kube_proxy(self, node: _Node) -> None:
        """Services' cluster IPs routed in the node's namespace (iptables rules kube-proxy keeps
        there, removed with it), so pods reach `kubernetes.default` as in-cluster clients do."""
        directory = node.directory / "kube-proxy"
        directory.mkdir()
        # The user the bootstrap policy binds to system:node-proxier (plugin/pkg/auth/
        # authorizer/rbac/bootstrappolicy/policy.go ClusterRoleBindings), as kubeadm's is bound.
        client = self.plane.ca.issue(f"{node.spec.name}-proxy", "system:kube-proxy")
        kubeconfig = self.plane.kubeconfig_for(directory / "kubeconfig", client)
        config = directory / "config.yaml"
        config.write_text(
            yaml.safe_dump(kube_proxy_config(node.spec.name, self.network.cluster_cidr, kubeconfig))
        )
        binary = str(self.tools.binary("kube-proxy"))
        node.kube_proxy = self._spawn(node, "kube-proxy", [binary, f"--config={config}"])

    # --- processes and cleanup ---------------------------------------------------------------

    def _spawn(self, node: _Node, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        log = node.directory / f"{name}.log"
        with log.open("wb") as sink:
            popen = subprocess.Popen(
                self.network.enter(node.index, command),
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=node.directory,
                env=tool_env(),
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.log(f"{node.spec.name}: started {name} (pid {popen.pid})")
        return popen

    @contextlib.contextmanager
    def frozen(self, pod: Object) -> Iterator[None]:
        """The running `pod`'s processes frozen on its node (noderuntime.frozen_pod)."""
        (node,) = [n for n in self._nodes if n.spec.name == pod["spec"]["nodeName"]]
        with frozen_pod(node.cgroup_root, pod["metadata"]["uid"]):
            yield

    def log_tail(self, index: int, name: str, lines: int = 40) -> str:
        """The last lines node `index`'s `name` (kubelet, containerd) logged."""
        log = self._nodes[index].directory / f"{name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        # The kubelets first: none starts a container again once its pods are killed.
        terminate([n.kubelet for n in self._nodes if n.kubelet])
        terminate([n.kube_proxy for n in self._nodes if n.kube_proxy])
        for node in reversed(self._nodes):
            kill_cgroup(node.cgroup_root)
            terminate([node.containerd] if node.containerd else [])
            kill_shims(node.socket)
            unmount_under(node.directory)
            remove_cgroup(node.cgroup_root)
            remove_container_log_links(node.pod_logs)
        self._nodes.clear()
        if self._multus is not None:
            self._multus.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _ready(kube: Kube, name: str) -> bool:
    with contextlib.suppress(Exception):
        node = kube.get("v1", "Node", name)
        conditions = node.get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return False


def _allocatable(kube: Kube, spec: NodeSpec) -> bool:
    allocatable = kube.get("v1", "Node", spec.name).get("status", {}).get("allocatable", {})
    return all(allocatable.get(k) == v for k, v in spec.extended_resources.items())


def _answers(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as response:
        return bool(response.status == 200)
    return False
