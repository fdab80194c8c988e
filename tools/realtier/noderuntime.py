"""What a real node runs beside its kubelet: containerd's configuration (its own root, state,
socket and runc root; the CNI bridge), images imported into it, and the node's cgroups and
processes, ended and removed when the node stops (tools/realtier/realnodes.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from tools.realtier.controlplane import STOP_GRACE_S, StartError

_CGROUP_FS = Path("/sys/fs/cgroup")
# Where every kubelet links its containers' logs, whatever its podLogsDir (pkg/kubelet/
# kuberuntime ContainerLogsDir): shared by the nodes and the host.
_CONTAINER_LOG_LINKS = Path("/var/log/containers")


def containerd_config(
    base: Path, socket: Path, sandbox_image: str, cni_bin: Path, cni_conf: Path
) -> str:
    """containerd 1.6's configuration (version 2, docs/cri/config.md) for one node: everything
    below `base`, runc with the cgroupfs driver the kubelet uses, the local pause image."""
    cri = {
        "sandbox_image": sandbox_image,
        # The pods' network namespaces below the state directory, not /var/run/netns: removed
        # with the node.
        "netns_mounts_under_state_dir": True,
        # No pod's oom_score_adj below containerd's own (docs/cri/config.md, meant for rootless
        # runs): test machines may lack CAP_SYS_RESOURCE (this one does), and runc's write of
        # the sandbox's -998 then fails every pod ("failed to update /proc/self/oom_score_adj").
        "restrict_oom_score_adj": True,
        "containerd": {
            "snapshotter": "overlayfs",
            "default_runtime_name": "runc",
            "runtimes": {
                "runc": {
                    "runtime_type": "io.containerd.runc.v2",
                    # runc's state defaults to /run/containerd/runc, which nodes would share.
                    "options": {"SystemdCgroup": False, "Root": str(base / "runc")},
                }
            },
        },
        "cni": {"bin_dir": str(cni_bin), "conf_dir": str(cni_conf)},
    }
    config = {
        "version": 2,
        "root": str(base / "root"),
        "state": str(base / "state"),
        "grpc": {"address": str(socket)},
        "plugins": {
            "io.containerd.grpc.v1.cri": cri,
            "io.containerd.internal.v1.opt": {"path": str(base / "opt")},
        },
    }
    return _toml(config)


def cni_config(subnet: str, ipam_dir: Path) -> dict[str, object]:
    """The CNI bridge with host-local addresses from the node's pod subnet (containernetworking
    plugins v1.10.0 plugins/main/bridge/README.md): the bridge is the pods' gateway; no
    masquerade, so a pod sees its peers' own addresses across nodes."""
    return {
        "cniVersion": "1.0.0",
        "name": "realnodes",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(ipam_dir),
                },
            }
        ],
    }


def kube_proxy_config(node_name: str, cluster_cidr: str, kubeconfig: Path) -> dict[str, object]:
    """kube-proxy's KubeProxyConfiguration (k8s.io/kube-proxy config/v1alpha1 types.go) for one
    node, in iptables mode, inside the node's network namespace. It leaves the host's shared
    settings alone: no conntrack table size or timeouts (cmd/kube-proxy/app/server_linux.go
    setupConntrack sets them only when above zero; the table size is not per namespace), no
    oom_score_adj below the tier's (root here lacks CAP_SYS_RESOURCE)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "mode": "iptables",
        # Traffic from outside the pods' range to a Service is masqueraded (the node's own).
        "clusterCIDR": cluster_cidr,
        "oomScoreAdj": 0,
        "conntrack": {
            "maxPerCore": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def import_image(socket: Path, archive: Path) -> None:
    """Into the namespace the CRI plugin serves, unpacked for its snapshotter, as kind loads an
    image into a node (kind pkg/cluster/nodeutils/util.go LoadImageArchive)."""
    command = ["ctr", "--address", str(socket), "--namespace=k8s.io", "images", "import"]
    command += ["--snapshotter=overlayfs", str(archive)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise StartError(f"{' '.join(command)}: {result.stderr.strip()}")


def _toml(config: dict[str, object], prefix: str = "") -> str:
    """containerd's config as TOML: scalars, lists of scalars and tables (all it needs)."""
    scalars, tables = [], []
    for key, value in config.items():
        if isinstance(value, dict):
            quoted = f'"{key}"' if "." in key else key
            name = f"{prefix}.{quoted}" if prefix else quoted
            tables.append(f"\n[{name}]\n{_toml(value, name)}")
        else:
            scalars.append(f"{key} = {json.dumps(value)}\n")
    return "".join(scalars) + "".join(tables)


def _controllers() -> list[Path]:
    """The cgroup v1 hierarchies (cpu and cpuacct are links to one mount on some hosts)."""
    return [p for p in _CGROUP_FS.iterdir() if p.is_dir() and not p.is_symlink()]


def make_cgroup(root: str) -> None:
    """The kubelet's cgroupRoot must exist (cm.validateSystemRequirements); cgroup v1's cpuset
    starts empty, so it takes its parent's CPUs and memory nodes."""
    for controller in _controllers():
        directory = controller / root
        directory.mkdir(exist_ok=True)
        if controller.name == "cpuset":
            for name in ("cpuset.cpus", "cpuset.mems"):
                (directory / name).write_text((controller / name).read_text())


def _cgroup_pids(root: str) -> set[int]:
    pids: set[int] = set()
    for controller in _controllers():
        # os.walk skips a directory that vanishes mid-walk (a container's cgroup as it exits),
        # where rglob raised FileNotFoundError and failed the node's stop.
        for directory, _, files in os.walk(controller / root):
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError):
                    text = (Path(directory) / "cgroup.procs").read_text()
                    pids |= {int(p) for p in text.split()}
    return pids


@contextlib.contextmanager
def frozen_pod(root: str, pod_uid: str) -> Iterator[None]:
    """Every process of the pod `pod_uid` in the node's cgroups (`root`) stopped by cgroup v1's
    freezer (Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst), as a stalled kernel or
    a hung device holds them: a process that joins the pod (an exec) stops too, so it never
    answers. Thawed at the end."""
    pod = f"pod{pod_uid}"  # the kubelet's cgroupfs name (pkg/kubelet/cm GetPodContainerName)
    (state,) = [
        Path(directory) / "freezer.state"
        for directory, _, _ in os.walk(_CGROUP_FS / "freezer" / root)
        if Path(directory).name == pod
    ]
    state.write_text("FROZEN")
    try:
        yield
    finally:
        state.write_text("THAWED")


def kill_cgroup(root: str) -> None:
    """SIGKILL every process in the node's cgroups (its pods' containers) until none is left."""
    deadline = time.monotonic() + STOP_GRACE_S
    while (pids := _cgroup_pids(root)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def remove_cgroup(root: str) -> None:
    for controller in _controllers():
        top = controller / root
        if top.is_dir():
            for directory in sorted(
                (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
            ):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()


def kill_shims(socket_path: Path) -> None:
    """containerd leaves its shims running when it exits (by design: containers outlive a
    restart); this node's are the ones started with its socket's address."""
    marker = str(socket_path).encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes()
                if b"containerd-shim" in cmdline and marker in cmdline:
                    os.kill(int(proc.name), signal.SIGKILL)


def terminate(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for popen in processes:
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


def remove_container_log_links(pod_logs: Path) -> None:
    """The links a stopped kubelet left to its pods' logs (one removes them with the container;
    a killed node's stay)."""
    if _CONTAINER_LOG_LINKS.is_dir():
        for link in _CONTAINER_LOG_LINKS.iterdir():
            if link.is_symlink() and Path(os.readlink(link)).is_relative_to(pod_logs):
                link.unlink()
