"""Pods that really run, on real nodes (tools/realtier/realnodes.py): a kubelet and containerd
per node, each node in its own network namespace, the CNI bridge, CoreDNS as cluster DNS.

What a kwok node cannot show: a container's command runs and its output comes back through the
API server from the kubelet; two pods of a StatefulSet on two nodes find each other by the
`<pod>.<service>` names torchrun rendezvouses on and exchange bytes across the node boundary;
the stack's security context is enforced by the runtime and the kernel; a pod reaches the API
server through the `kubernetes` Service (kube-proxy's rules on each node) with its service
account's token, as in-cluster clients do.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.real.conftest import REAL_NODES, RealCluster, on_one_worker, real_nodes_cluster
from tools.realtier.build import Tools
from tools.realtier.images import NodeImages
from tools.realtier.kube import Kube, describe, wait_for
from tools.realtier.stacks import render

pytestmark = [pytest.mark.real, on_one_worker(__name__)]

NAMESPACE = "real-nodes"
# A TCP port the peers serve on (any unprivileged port).
PEER_PORT = 7000


@pytest.fixture(scope="module")
def module_nodes(
    node_tools: Tools, node_images: NodeImages, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealCluster]:
    """Two real nodes for all of the module's tests (one worker runs them: on_one_worker)."""
    workdir = tmp_path_factory.mktemp("real-nodes")
    with real_nodes_cluster(node_tools, node_images, workdir) as cluster:
        yield cluster


@pytest.fixture
def nodes(module_nodes: RealCluster) -> Iterator[RealCluster]:
    """The module's nodes with NAMESPACE created afresh for one test, and deleted after it until
    it is gone: its pods have let go of the GPUs they asked for before the next test's ask."""
    kube = module_nodes.kube
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    yield module_nodes
    kube.delete_and_follow("v1", "Namespace", NAMESPACE)


def _pod_phase(kube: Kube, name: str, phases: tuple[str, ...]) -> dict[str, Any] | None:
    if not kube.exists("v1", "Pod", name, NAMESPACE):  # a controller's pod, not yet created
        return None
    pod = kube.get("v1", "Pod", name, NAMESPACE)
    return pod if pod.get("status", {}).get("phase") in phases else None


def _finished(cluster: RealCluster, name: str) -> dict[str, Any]:
    return wait_for(
        f"pod {name} to finish",
        functools.partial(_pod_phase, cluster.kube, name, ("Succeeded", "Failed")),
        explain=lambda: describe(cluster.kube, NAMESPACE) + cluster.nodes.log_tail(0, "kubelet"),
    )


def _pod(name: str, command: list[str], image: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": image, "command": command}],
            **spec,
        },
    }


def test_a_pod_runs_its_command_on_a_real_node(nodes: RealCluster) -> None:
    """Scheduled by the GPUs the node advertises (an extended resource), run by containerd, its
    output read back as `kubectl logs` reads it (API server -> kubelet -> container log)."""
    kube = nodes.kube
    pod = _pod(
        "hello",
        [
            "python3",
            "-c",
            "import platform, socket; print('ran on', socket.gethostname(), "
            "'python', platform.python_version())",
        ],
        nodes.images.test.name,
    )
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    kube.create(pod)
    finished = _finished(nodes, "hello")

    assert finished["status"]["phase"] == "Succeeded", finished["status"]
    assert finished["spec"]["nodeName"] in {n.name for n in REAL_NODES}
    log = kube.pod_log("hello", NAMESPACE)
    assert re.fullmatch(r"ran on hello python 3\.\d+\.\d+\n", log), log


# Each peer serves on PEER_PORT, then resolves the other's `<pod>.<service>` name, sends it a
# greeting and prints the answer; it stops at SIGTERM and gives up after two minutes.
PEER_SCRIPT = f"""
import os, signal, socket, sys, threading, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
me = socket.gethostname()
base, ordinal = me.rsplit("-", 1)
peer = f"{{base}}-{{1 - int(ordinal)}}.{{os.environ['SERVICE']}}"
server = socket.create_server(("0.0.0.0", {PEER_PORT}))
def serve():
    while True:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(10)
            conn.sendall(conn.recv(1024) + f" answered by {{me}}".encode())
threading.Thread(target=serve, daemon=True).start()
deadline = time.monotonic() + 120
while True:
    try:
        address = socket.gethostbyname(peer)
        with socket.create_connection((address, {PEER_PORT}), timeout=5) as conn:
            conn.settimeout(10)
            conn.sendall(f"hello from {{me}}".encode())
            print(f"{{peer}} at {{address}}: {{conn.recv(1024).decode()}}", flush=True)
        break
    except OSError as error:
        if time.monotonic() > deadline:
            sys.exit(f"gave up on {{peer}}: {{error}}")
        time.sleep(1)
signal.pause()
"""


def test_statefulset_peers_on_two_nodes_reach_each_other_by_name(
    nodes: RealCluster,
) -> None:
    """As the stack's training pods: a StatefulSet behind a headless Service, one pod per GPU
    node (each asks for all of a node's GPUs); each resolves `<peer>.<service>` through cluster
    DNS and the bytes cross from one node's network namespace into the other's."""
    kube = nodes.kube
    labels = {"app": "peers"}
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "peers", "namespace": NAMESPACE},
            "spec": {"clusterIP": "None", "selector": labels, "ports": [{"port": PEER_PORT}]},
        }
    )
    gpus = REAL_NODES[0].extended_resources["nvidia.com/gpu"]
    container = {
        "name": "peer",
        "image": nodes.images.test.name,
        "command": ["python3", "-c", PEER_SCRIPT],
        "env": [{"name": "SERVICE", "value": "peers"}],
        "resources": {"limits": {"nvidia.com/gpu": gpus}},
    }
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "rank", "namespace": NAMESPACE},
            "spec": {
                "serviceName": "peers",
                "replicas": 2,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        }
    )

    def greeted() -> dict[str, str] | None:
        logs = {}
        for name in ("rank-0", "rank-1"):
            if _pod_phase(kube, name, ("Running",)) is None:
                return None
            logs[name] = kube.pod_log(name, NAMESPACE)
        return logs if all(logs.values()) else None

    logs = wait_for(
        "both peers to greet each other",
        greeted,
        explain=lambda: describe(kube, NAMESPACE) + nodes.nodes.log_tail(0, "kubelet"),
    )
    pods = {name: kube.get("v1", "Pod", name, NAMESPACE) for name in logs}
    assert pods["rank-0"]["spec"]["nodeName"] != pods["rank-1"]["spec"]["nodeName"]
    for me, peer in (("rank-0", "rank-1"), ("rank-1", "rank-0")):
        peer_ip = pods[peer]["status"]["podIP"]
        assert logs[me] == f"{peer}.peers at {peer_ip}: hello from {me} answered by {peer}\n"


# A fabric check's summary (scripts/fabric_verdict.py summary).
SUMMARY = "busbw 1.250 GB/s over 2097152..8388608 B: PASS: data check ok"


def test_the_stacks_security_context_is_enforced(nodes: RealCluster) -> None:
    """nerc-production's training pod and container security context, with the UID OpenShift's
    restricted-v2 SCC assigns (MustRunAsRange: the first of the namespace's
    openshift.io/sa.scc.uid-range, 1000650000/10000 on a fresh project): the container starts,
    runs as that user with no capabilities, no new privileges and the runtime's seccomp filter;
    it may write its termination message, which the kubelet reports, as the fabric check's rank 0
    leaves its summary for the node health runner (its pods are the training pod's)."""
    (statefulset,) = render("nerc-production").of_kind("StatefulSet")
    template = statefulset["spec"]["template"]["spec"]
    training = next(c for c in template["containers"] if c["name"] == "training")
    uid = 1000650000
    kube = nodes.kube
    pod = _pod(
        "confined",
        [
            "sh",
            "-c",
            "id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; "
            f"echo '{SUMMARY}' > /dev/termination-log",
        ],
        nodes.images.test.name,
        securityContext={**template["securityContext"], "runAsUser": uid},
    )
    pod["spec"]["containers"][0]["securityContext"] = training["securityContext"]
    kube.create(pod)
    finished = _finished(nodes, "confined")

    assert finished["status"]["phase"] == "Succeeded", finished["status"]
    (status,) = finished["status"]["containerStatuses"]
    assert status["state"]["terminated"]["message"].strip() == SUMMARY
    lines = kube.pod_log("confined", NAMESPACE).split()
    # /proc/self/status (proc(5)): effective capabilities as a mask, 1 when no_new_privs is set,
    # 2 for a seccomp filter.
    assert lines == [
        str(uid),
        "CapEff:",
        "0000000000000000",
        "NoNewPrivs:",
        "1",
        "Seccomp:",
        "2",
    ], lines


# As in-cluster clients (client-go rest.InClusterConfig, the stack's scripts/kube_api.py) reach
# the API server: the Service's address from the kubelet's environment, then by its DNS name; the
# service account's token and the cluster's CA from the projected volume. A SelfSubjectReview
# (allowed to every authenticated user) says whom the token authenticated.
IN_CLUSTER_SCRIPT = """
import json, os, ssl, urllib.request
account = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(f"{account}/token").read()
context = ssl.create_default_context(cafile=f"{account}/ca.crt")
review = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
port = os.environ["KUBERNETES_SERVICE_PORT"]
for host in (os.environ["KUBERNETES_SERVICE_HOST"], "kubernetes.default.svc"):
    request = urllib.request.Request(
        f"https://{host}:{port}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        review.encode(),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        print(host, json.load(response)["status"]["userInfo"]["username"], flush=True)
"""


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service(
    nodes: RealCluster,
) -> None:
    """The `kubernetes` Service's cluster IP and DNS name lead to the API server, whose
    certificate is valid for both, and the pod's service-account token authenticates it."""
    kube = nodes.kube
    wait_for(
        "the namespace's default service account",
        lambda: kube.exists("v1", "ServiceAccount", "default", NAMESPACE),
    )
    kube.create(_pod("in-cluster", ["python3", "-c", IN_CLUSTER_SCRIPT], nodes.images.test.name))
    finished = _finished(nodes, "in-cluster")

    log = kube.pod_log("in-cluster", NAMESPACE)
    assert finished["status"]["phase"] == "Succeeded", log
    service = kube.get("v1", "Service", "kubernetes", "default")["spec"]["clusterIP"]
    user = f"system:serviceaccount:{NAMESPACE}:default"
    assert log.splitlines() == [f"{service} {user}", f"kubernetes.default.svc {user}"], log
