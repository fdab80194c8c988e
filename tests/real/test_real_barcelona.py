"""barcelona (networkMode rdma) on two real nodes whose CNI is Multus (issue #39), through
`pulumi up` of the real engine, its four NetworkAttachmentDefinitions created by the stack as
macvlan on the NICs the seed's NADs name (rdma.networkAttachments=create, the seed's ranges):
each node has those NICs (links in its namespace, nodenet.add_nic), advertises the stack's RDMA
resources as extended resources, and Multus attaches the NADs as net1..net4 with whereabouts'
addresses. No RDMA device exists here, so:

- with detection as shipped, the detect-rdma init container of every pod fails at once with
  its message (net1 is there with its address, but no RDMA device), the training container
  never starts and `pulumi up` gives up waiting for the StatefulSet;
- with the devices pinned (no init step), the pods run with net1..net4 attached, each NIC's
  segment crossing the nodes; preflight finds no RDMA device on every pod, and the exported
  `launchCommand` stops at preflight: torchrun never starts, so no pod waits in a rendezvous;
- the same stack with `networkMode: tcp` (its pods replaced, no NADs) trains on every rank.

What differs from barcelona: one GPU a node (advertised only), small CPU and memory requests,
the training image (tests/real/training.py), macvlan NADs where the cluster has SR-IOV ones
(no VF here), the nodes named as the stack's first two hosts; the SCC is stored, not enforced
(the UID restricted-v2 would give is given in admission: training.provide_platform)."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BARCELONA_CREATES_NADS
from tests.real.cluster_state import pods_of, read_live, stack_engine, statefulset_settled
from tests.real.conftest import RealCluster, on_one_worker, real_nodes_cluster
from tests.real.training import (
    assert_nothing_trains,
    exec_in,
    in_training,
    launch_until_steps,
    provide_platform,
    run_exported,
    steps,
    training_overrides,
    training_render,
    training_stack_or_skip,
    user_env,
)
from tools.realtier.build import Tools
from tools.realtier.engine import Engine
from tools.realtier.images import NodeImages
from tools.realtier.kube import Kube, install_crds, wait_for
from tools.realtier.realnodes import NodeSpec
from tools.realtier.stacks import StackRender
from tools.realtier.torchimage import locate_training_image

pytestmark = [pytest.mark.real, on_one_worker(__name__)]

STACK = "barcelona"
# The seed's NICs behind its four NADs (k8s/network-attachments/: eno5np0..eno8np0), as the
# macvlan masters of the NADs the stack creates here.
NICS = ("eno5np0", "eno6np0", "eno7np0", "eno8np0")
MACVLAN = tuple(
    setting
    for i, nic in enumerate(NICS)
    for setting in (f"rdma.nics[{i}].flavour=macvlan", f"rdma.nics[{i}].master={nic}")
)
RDMA = (*BARCELONA_CREATES_NADS, *MACVLAN)
# Each NIC's device and GID index stated (the seed's mlx5_6..9 and GID 3), so no detection init
# step runs.
PINNED = (*(f"rdma.nics[{i}].hca=mlx5_{6 + i}" for i in range(len(NICS))), "rdma.gidIndex=3")
# The provider gives up on the StatefulSet after a minute (pods that cannot start).
GIVE_UP = "workload.startTimeoutMinutes=1"
MULTUS_STATUS = "k8s.v1.cni.cncf.io/network-status"


@pytest.fixture(scope="module")
def rdma_stack(node_images: NodeImages) -> StackRender:
    return training_stack_or_skip(node_images, RDMA, STACK)


def nad_masters(stack: StackRender) -> tuple[str, ...]:
    """The links the stack's NADs attach macvlans to."""
    return tuple(
        json.loads(nad["spec"]["config"])["master"]
        for nad in stack.of_kind("NetworkAttachmentDefinition")
    )


def nad_ranges(stack: StackRender) -> dict[str, ipaddress.IPv4Network]:
    """NAD name -> the range its whereabouts IPAM hands out."""
    return {
        nad["metadata"]["name"]: ipaddress.IPv4Network(
            json.loads(nad["spec"]["config"])["ipam"]["range"]
        )
        for nad in stack.of_kind("NetworkAttachmentDefinition")
    }


@dataclass(frozen=True)
class Barcelona:
    cluster: RealCluster
    engine: Engine
    env: dict[str, str]
    images: NodeImages


@pytest.fixture(scope="module")
def barcelona(
    tools: Tools,
    node_images: NodeImages,
    rdma_stack: StackRender,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Barcelona]:
    """Two real nodes named and labelled as the stack's first two hosts, with the NICs its NADs
    name and its GPUs and RDMA resources advertised; the upstream CRDs (NADs, SCCs) served;
    what the platform provides (namespace, claims' volumes, restricted-v2's UID)."""
    tmp_path = tmp_path_factory.mktemp("barcelona")
    image = locate_training_image(node_images.test)
    assert image is not None
    specs = [
        NodeSpec(
            host.name,
            labels=host.labels,
            taints=tuple(host.taints),
            extended_resources={
                k: v for k, v in host.allocatable.items() if k not in ("cpu", "memory")
            },
            nics=nad_masters(rdma_stack),
        )
        for host in rdma_stack.nodes()[: rdma_stack.settings.nodes]
    ]
    with real_nodes_cluster(tools, node_images, tmp_path, specs, (image,), multus=True) as cluster:
        install_crds(cluster.kube, tools.crds)
        provide_platform(cluster, rdma_stack, tmp_path / "volumes")
        engine = stack_engine(cluster, STACK, tmp_path / "engine")
        yield Barcelona(cluster, engine, user_env(cluster, tmp_path, STACK), node_images)


def overrides(barcelona: Barcelona, *edits: str) -> tuple[str, ...]:
    return training_overrides(barcelona.images, (*RDMA, *edits))


def stack_pods(kube: Kube, stack: StackRender) -> list[dict[str, Any]]:
    (statefulset,) = stack.of_kind("StatefulSet")
    return pods_of(kube, read_live(kube, statefulset))


def attached(pod: dict[str, Any]) -> dict[str, list[str]]:
    """interface -> addresses, as Multus reports the pod's networks (network-status)."""
    status = json.loads(pod["metadata"].get("annotations", {}).get(MULTUS_STATUS, "[]"))
    return {n["interface"]: n.get("ips", []) for n in status if "interface" in n}


def test_rdma_detection_fails_at_once_on_every_pod(
    barcelona: Barcelona, rdma_stack: StackRender
) -> None:
    kube = barcelona.cluster.kube
    gave_up = barcelona.engine.up(*overrides(barcelona, GIVE_UP), check=False)
    (statefulset,) = rdma_stack.of_kind("StatefulSet")
    assert gave_up.error is not None
    assert f"'{statefulset['metadata']['name']}' timed out" in gave_up.error, gave_up.error
    pods = stack_pods(kube, rdma_stack)
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(
        n.name for n in rdma_stack.nodes()[:2]
    )
    ranges = nad_ranges(rdma_stack)
    for pod in pods:
        name = pod["metadata"]["name"]
        # net1..net4 attached by Multus, each with an address from its NAD's range.
        networks = attached(pod)
        assert sorted(networks) == ["eth0", "net1", "net2", "net3", "net4"], (name, networks)
        for nic in rdma_stack.settings.rdma.nics:  # type: ignore[union-attr]
            (address,) = networks[nic.interface]
            assert ipaddress.IPv4Address(address) in ranges[nic.network], (name, networks)
        (detect,) = pod["status"]["initContainerStatuses"]
        ended = detect["state"].get("terminated") or detect["lastState"].get("terminated")
        assert ended is not None and ended["exitCode"] == 1, (name, detect)
        log = kube.pod_log(name, pod["metadata"]["namespace"], container="detect-rdma")
        assert "detect-rdma: error: interface net1 has no RDMA device" in log, (name, log)
        # The training container never started: no rank reached a rendezvous.
        (training,) = pod["status"]["containerStatuses"]
        assert "waiting" in training["state"] and not training["lastState"], (name, training)


def pod_addresses(kubectl: Path, pod: dict[str, Any], env: dict[str, str]) -> dict[str, str]:
    """interface -> its IPv4 address with prefix, as `ip` in the pod sees them."""
    shown = in_training(kubectl, pod, env, "ip", "-o", "-4", "addr", "show")
    assert shown.returncode == 0, shown.stderr
    return dict(re.findall(r"^\d+: (\S+)\s+inet (\S+)", shown.stdout, re.MULTILINE))


# A TCP listener on one address that answers its one caller with the caller's address, and a
# caller that retries until the listener is up; port 7777: any free port of the pod's.
ANSWER_PEER = """
import socket, sys
server = socket.create_server((sys.argv[1], 7777))
server.settimeout(60)
peer, (address, _port) = server.accept()
peer.sendall(address.encode())
"""
CALL = """
import socket, sys, time
for _ in range(60):
    try:
        print(socket.create_connection((sys.argv[1], 7777), timeout=5).recv(64).decode())
        break
    except ConnectionRefusedError:
        time.sleep(0.5)
"""


def caller_seen_over(
    kubectl: Path, env: dict[str, str], server: dict[str, Any], client: dict[str, Any], at: str
) -> str:
    """The address `server`, listening on its `at`, sees `client`'s connection come from."""
    listener = subprocess.Popen(
        [*exec_in(kubectl, server), "python3", "-c", ANSWER_PEER, at], env=env
    )
    try:
        called = in_training(kubectl, client, env, "python3", "-c", CALL, at)
        assert called.returncode == 0, called.stderr
        assert listener.wait(timeout=60) == 0
    finally:
        if listener.poll() is None:
            listener.kill()
    return called.stdout.strip()


def test_preflight_stops_the_launch_on_every_pod(
    barcelona: Barcelona, rdma_stack: StackRender, tmp_path: Path
) -> None:
    """The NICs' devices pinned (no detection step): the pods run with net1..net4 attached;
    preflight finds no RDMA device on every pod, and launchCommand stops there."""
    kube, env = barcelona.cluster.kube, barcelona.env
    kubectl = barcelona.cluster.tools.binary("kubectl")
    # The provider's own wait again.
    barcelona.engine.up(*overrides(barcelona, *PINNED, f"!{GIVE_UP.split('=')[0]}"))
    pods = stack_pods(kube, rdma_stack)
    assert all(not p["spec"].get("initContainers") for p in pods), "an init step runs"
    ranges = nad_ranges(rdma_stack)
    nics = rdma_stack.settings.rdma.nics  # type: ignore[union-attr]
    addresses: dict[str, dict[str, str]] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        seen = pod_addresses(kubectl, pod, env)
        for nic in nics:
            assert ipaddress.IPv4Interface(seen[nic.interface]).network == ranges[nic.network], (
                name,
                seen,
            )
        addresses[name] = seen
        preflight = in_training(kubectl, pod, env, "/opt/gpu-cluster/preflight.sh")
        assert preflight.returncode == 1, (name, preflight.stdout, preflight.stderr)
        assert "preflight: FAIL: RDMA: no /dev/infiniband/uverbs* device" in preflight.stderr
        for nic in nics:
            assert f"preflight: FAIL: {nic.interface}: no RoCE v2 GID" in preflight.stderr, (
                name,
                preflight.stderr,
            )
    # Each NIC's segment crosses the nodes: pod 1, on the other node, reaches pod 0 on its
    # netN address from its own netN address.
    server, client = pods
    for nic in nics:
        at = addresses[server["metadata"]["name"]][nic.interface].split("/")[0]
        came_from = caller_seen_over(kubectl, env, server, client, at)
        mine = addresses[client["metadata"]["name"]][nic.interface].split("/")[0]
        assert came_from == mine, (nic.interface, came_from, mine)

    launch = run_exported(rdma_stack.run.outputs["launchCommand"], env)
    printed = launch.stdout + launch.stderr
    assert launch.returncode == 1, printed
    assert "preflight failed (exit 1); not starting torchrun" in printed, printed
    assert "preflight: FAIL: RDMA: no /dev/infiniband/uverbs* device" in printed, printed
    assert not steps(printed), printed
    assert_nothing_trains(kubectl, pods, env)


def test_the_same_pods_train_with_network_mode_tcp(
    barcelona: Barcelona, rdma_stack: StackRender, tmp_path: Path
) -> None:
    """networkMode tcp: the pods replaced without NADs (only eth0, the interface NCCL's socket
    transport and gloo find), and torchrun across the nodes steps on every rank."""
    kube, env = barcelona.cluster.kube, barcelona.env
    kubectl = barcelona.cluster.tools.binary("kubectl")
    tcp = training_render(barcelona.images, (*RDMA, *PINNED, "networkMode=tcp"), STACK)
    assert tcp is not None
    barcelona.engine.up(*overrides(barcelona, *PINNED, "networkMode=tcp"))
    # The tier's provider (4.25) may end `up` before the StatefulSet's controller saw the new
    # spec; from 4.26 it waits for the rollout, as here (tests/real/cluster_state.py).
    (statefulset,) = tcp.of_kind("StatefulSet")
    wait_for("the pods rolled out", lambda: statefulset_settled(kube, statefulset))
    pods = stack_pods(kube, tcp)
    for pod in pods:
        assert set(pod_addresses(kubectl, pod, env)) == {"lo", "eth0"}, pod["metadata"]["name"]
    printed = launch_until_steps(
        tcp.run.outputs["launchCommand"], env, tmp_path / "launch.out", len(pods)
    )
    assert "preflight" not in printed, printed
    assert_nothing_trains(kubectl, pods, env)
