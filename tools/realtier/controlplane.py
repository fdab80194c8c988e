"""A Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (fake nodes and pods), started from the built tools.

Flags follow controller-runtime's envtest (pkg/internal/testing/controlplane, v0.24.1) and
kwokctl's components (sigs.k8s.io/kwok pkg/kwokctl/components, v0.8.0): every port is picked
free on 127.0.0.1, certificates are made per run, everything is stopped and removed on exit.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools.realtier.build import Tools
from tools.realtier.certs import CertificateAuthority, Pair, service_account_keys

# Starting five processes on two busy cores can take a while; a stuck one fails after this.
START_DEADLINE_S = 180.0
# The Services' cluster IP range, and the first address in it, which the API server gives the
# `kubernetes` Service (pkg/controlplane/services.go ServiceIPRange: the range's first IP).
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"
# The names pods reach the API server by, in its serving certificate as kubeadm puts them
# (cmd/kubeadm/app/phases/certs/certlist.go, GetAPIServerAltNames).
KUBERNETES_SERVICE_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
)
STOP_GRACE_S = 20.0
# Where outgoing connections take their local ports (Linux; 32768-60999 by default), and the
# first port free_port() picks from, outside them: above the well-known and common services'.
EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORTS_FROM = 20000
# kwok manages the nodes that carry this annotation (kwok --manage-nodes-with-annotation-selector).
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# The Go runtime of every tool the tier runs (the control plane, the managers, the nodes'
# kubelets and containerd, the Pulumi CLI and provider), as the runtime package reads it
# (pkg.go.dev/runtime, "Environment Variables"): one thread running Go code each, since several
# control planes share two cores, and a collection once the heap reaches 5x what was live after
# the last (GOGC=400, default 100), an API server's ~0.5 GB becoming ~1.2. Measured on a control
# plane with Kueue and JobSet (docs/performance.md): about a third less CPU to start and idle.
GO_RUNTIME = {"GOMAXPROCS": "1", "GOGC": "400"}


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies, so a killed
    test run leaves no control plane behind (prctl(2) PR_SET_PDEATHSIG; Linux)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def tool_env() -> dict[str, str]:
    """This process's environment with GO_RUNTIME: what a tier's tool is started with."""
    return {**os.environ, **GO_RUNTIME}


def free_port() -> int:
    """A port free on 127.0.0.1 now, taken at random outside the kernel's ephemeral range
    (ip-sysctl.rst, ip_local_port_range), from which every outgoing connection gets its local
    port: a port the kernel hands out for bind(0) can be taken by a client's connection before
    the component binds it (Kueue's health probe once failed so, "address already in use")."""
    low, high = (int(bound) for bound in EPHEMERAL_PORTS.read_text().split())
    outside = [*range(PORTS_FROM, low), *range(high + 1, 65536)]
    if not outside:
        raise RuntimeError(f"no port outside the ephemeral range {low}-{high} ({EPHEMERAL_PORTS})")
    while True:
        port: int = random.choice(outside)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:  # in use
                continue
            return port


class StartError(RuntimeError):
    """A component did not come up; the message carries the tail of its log."""


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class ControlPlane:
    """Start with `start()` (or as a context manager); `kubeconfig` is the admin's."""

    tools: Tools
    log: Callable[[str], None] = lambda _message: None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="realtier-")))
    # kwok's stages when not all of `tools.kwok_stages` (without pod-complete, Job pods run on).
    kwok_stages: tuple[Path, ...] | None = None
    # Where the API server listens: loopback, or an address real nodes in their own network
    # namespaces reach (tools/realtier/realnodes.py); the other components stay on loopback.
    address: str = "127.0.0.1"
    _processes: list[_Process] = field(default_factory=list)
    # The per-run CA (set by `start()`): real nodes get their kubelets' pairs from it.
    ca: CertificateAuthority = field(init=False)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def training_log(self) -> Path:
        """What every pod's training container has printed, as the kubelet keeps it (CRI
        format: `<RFC 3339 nano> stdout F <line>`): kwok serves it to `kubectl logs`."""
        return self.workdir / "logs" / "training.log"

    def __enter__(self) -> ControlPlane:
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
        pki = self.workdir / "pki"
        pki.mkdir(parents=True)
        ca = CertificateAuthority(pki)
        self.ca = ca
        serving = ca.issue(
            "apiserver",
            "localhost",
            server=True,
            dns_names=KUBERNETES_SERVICE_NAMES,
            ip_addresses=(self.address, KUBERNETES_SERVICE_IP),
        )
        # kwok's server stands in for the kubelets' API (logs), on the port the nodes publish.
        kubelet_serving = ca.issue("kwok", "localhost", server=True)
        admin = ca.issue("admin", "realtier-admin", organizations=("system:masters",))
        service_accounts = service_account_keys(pki)

        etcd_port, etcd_peer_port = free_port(), free_port()
        self.spawn(
            "etcd",
            [
                str(self.tools.binary("etcd")),
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{etcd_peer_port}",
                "--unsafe-no-fsync=true",
            ],
        )
        self.wait_http("etcd", f"http://127.0.0.1:{etcd_port}/health")

        api_port = free_port()
        server = f"https://{self.address}:{api_port}"
        self.spawn(
            "kube-apiserver",
            [
                str(self.tools.binary("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--secure-port={api_port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={ca.cert_path}",
                f"--kubelet-certificate-authority={ca.cert_path}",
                f"--kubelet-client-certificate={admin.cert}",
                f"--kubelet-client-key={admin.key}",
                # A real node's hostname resolves nowhere: its InternalIP first, as kubeadm sets
                # it (cmd/kubeadm/app/phases/controlplane/manifests.go).
                "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
                "--authorization-mode=RBAC",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--service-account-issuer={server}",
                f"--service-account-key-file={service_accounts.cert}",
                f"--service-account-signing-key-file={service_accounts.key}",
                # Privileged pods are allowed as on GKE (Google's TCPXO installer runs privileged);
                # the program's own pods are checked against least privilege elsewhere.
                "--allow-privileged=true",
                # MutatingAdmissionPolicy (beta since 1.34, off by default: k8s.io/apiserver
                # pkg/features/kube_features.go): the real nodes' tests give pods the UID that
                # OpenShift's restricted-v2 SCC admission gives them, in admission as there.
                "--feature-gates=MutatingAdmissionPolicy=true",
                "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
                # kwokctl's settings for a small machine: no fairness queues, no in-flight caps.
                "--enable-priority-and-fairness=false",
                "--max-requests-inflight=0",
                "--max-mutating-requests-inflight=0",
            ],
        )
        self._write_kubeconfig(server, ca.cert_path, admin)
        self.wait_http("kube-apiserver", f"{server}/readyz", client=admin, ca=ca.cert_path)

        common = [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
        ]
        kcm_port = free_port()
        self.spawn(
            "kube-controller-manager",
            [
                str(self.tools.binary("kube-controller-manager")),
                *common,
                f"--secure-port={kcm_port}",
                f"--service-account-private-key-file={service_accounts.key}",
                f"--root-ca-file={ca.cert_path}",
                "--use-service-account-credentials=false",
                # No node IPAM (kwok hands out pod IPs itself). Every other controller runs as
                # upstream: the node lifecycle controller lifts the not-ready taint the API server
                # puts on a new node (TaintNodesByCondition) once kwok reports it Ready.
                "--controllers=*,-node-ipam-controller",
            ],
        )
        scheduler_port = free_port()
        self.spawn(
            "kube-scheduler",
            [str(self.tools.binary("kube-scheduler")), *common, f"--secure-port={scheduler_port}"],
        )
        self.wait_http("kube-controller-manager", f"https://127.0.0.1:{kcm_port}/healthz")
        self.wait_http("kube-scheduler", f"https://127.0.0.1:{scheduler_port}/healthz")

        stages = self.workdir / "kwok-stages.yaml"
        self.training_log.parent.mkdir()
        self.training_log.touch()
        stages.write_text(
            "\n---\n".join([*(p.read_text() for p in self._kwok_stages()), self._logs()]),
            encoding="utf-8",
        )
        # Picked just before kwok binds it, and awaited below: a port picked earlier, or not yet
        # bound when the next component picks its own, could be handed out twice.
        kubelet_port = free_port()
        self.spawn(
            "kwok",
            [
                str(self.tools.binary("kwok")),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                "--cidr=10.244.0.0/16",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=40",
                f"--node-port={kubelet_port}",
                f"--server-address=127.0.0.1:{kubelet_port}",
                f"--tls-cert-file={kubelet_serving.cert}",
                f"--tls-private-key-file={kubelet_serving.key}",
            ],
        )
        self.wait_http("kwok", f"https://127.0.0.1:{kubelet_port}/healthz", ca=ca.cert_path)
        self.log(f"control plane up in {time.monotonic() - started:.0f} s at {server}")

    def _logs(self) -> str:
        """kwok's ClusterLogs (sigs.k8s.io/kwok pkg/apis/v1alpha1 cluster_logs_types.go): every
        pod's training container logs `training_log`, read by the kubelet's own CRI log reader
        (kwok pkg/kwok/server/debugging_logs.go)."""
        return yaml.safe_dump(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "ClusterLogs",
                "metadata": {"name": "training"},
                "spec": {
                    "logs": [{"containers": ["training"], "logsFile": str(self.training_log)}]
                },
            }
        )

    def _kwok_stages(self) -> tuple[Path, ...]:
        return tuple(self.tools.kwok_stages) if self.kwok_stages is None else self.kwok_stages

    def spawn(self, name: str, command: list[str]) -> None:
        """Run `command` as part of this control plane: logged to <workdir>/<name>.log, stopped
        (newest first) by `stop()`; also for processes added later (tools/realtier/controllers)."""
        log = self.workdir / f"{name}.log"
        with log.open("wb") as sink:
            popen = subprocess.Popen(
                command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=tool_env(),
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self._processes.append(_Process(name, popen, log))
        self.log(f"started {name} (pid {popen.pid})")

    def _process(self, name: str) -> _Process:
        return next(p for p in self._processes if p.name == name)

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last lines a running component logged (for a failing test to show)."""
        return self._process(name).tail(lines)

    def wait_http(
        self, name: str, url: str, *, client: Pair | None = None, ca: Path | None = None
    ) -> None:
        """Poll `url` until it answers 200, failing early with the log if `name` exits."""
        context: ssl.SSLContext | None = None
        if url.startswith("https"):
            context = (
                ssl.create_default_context(cafile=str(ca)) if ca else ssl.create_default_context()
            )
            if ca is None:
                # The controller-manager and scheduler serve self-signed certificates.
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if client is not None:
                context.load_cert_chain(str(client.cert), str(client.key))
        deadline = time.monotonic() + START_DEADLINE_S
        process = self._process(name)
        while True:
            if process.popen.poll() is not None:
                raise StartError(
                    f"{name} exited with {process.popen.returncode}:\n{process.tail()}"
                )
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url, timeout=5, context=context) as response,
            ):
                if response.status == 200:
                    return
            if time.monotonic() > deadline:
                raise StartError(f"{name} not ready at {url}:\n{process.tail()}")
            time.sleep(0.2)

    def _write_kubeconfig(self, server: str, ca: Path, admin: Pair) -> None:
        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "realtier",
                    "cluster": {"server": server, "certificate-authority-data": b64(ca)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": b64(admin.cert),
                        "client-key-data": b64(admin.key),
                    },
                }
            ],
            "contexts": [{"name": "realtier", "context": {"cluster": "realtier", "user": "admin"}}],
            "current-context": "realtier",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config), encoding="utf-8")
        self.kubeconfig.chmod(0o600)

    def kubeconfig_for(self, path: Path, client: Pair) -> Path:
        """The admin's kubeconfig with `client` as the user (a node's kubelet, its kube-proxy)."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"] = [
            {
                "name": "client",
                "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
            }
        ]
        config["contexts"][0]["context"]["user"] = "client"
        path.write_text(yaml.safe_dump(config))
        return path

    def stop(self) -> None:
        """Stop every process (newest first: kwok before the API server before etcd)."""
        for process in reversed(self._processes):
            if process.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.popen.send_signal(signal.SIGTERM)
                try:
                    process.popen.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    process.popen.kill()
                    process.popen.wait()
        self._processes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)
