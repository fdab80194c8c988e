"""The stack-config schema: every rule rejects what it should, naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_cluster.config.derived import world_size
from gpu_cluster.config.loading import decode_config, load_settings
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.facts.kubernetes import parse_quantity

GCP = {
    "project": "my-gpu-project",
    "region": "us-central1",
    "zone": "us-central1-a",
    "authorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "displayName": "operators"}],
}
NIC = {
    "interface": "net1",
    "network": "eno5np0-network",
    "flavour": "sriov",
    "resource": "openshift.io/eno5np0rdma",
    "subnet": "10.0.103.0/24",
}


def nic(**changes: Any) -> dict[str, Any]:
    return {**NIC, **changes}


def rdma(*nics: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "platform": "openshift",
        "networkMode": "rdma",
        "rdma": {"nics": list(nics) or [NIC], **extra},
    }


def gke(mode: str = "tcpxo", **gcp: Any) -> dict[str, Any]:
    # kubernetesVersion names the minor of gcp.minMasterVersion's default (1.35).
    return {
        "platform": "gke",
        "networkMode": mode,
        "kubernetesVersion": "1.35",
        "gcp": {**GCP, **gcp},
        "storage": {"mode": "per-pod"},  # GKE's default class has no shared claims
    }


def error_of(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(raw)
    return str(info.value)


def test_minimal_openshift_stack_gets_documented_defaults() -> None:
    s = load_settings({"platform": "openshift"})
    assert (s.nodes, s.gpus_per_node, s.network_mode) == (2, 8, "tcp")
    assert s.storage.retain_on_delete is True
    assert world_size(s) == 16


def test_engine_strings_are_coerced_like_pulumi_config_values() -> None:
    raw = decode_config(
        {
            "platform": "openshift",
            "nodes": "4",
            "namespaceMode": "reference",
            "storage": '{"mode":"per-pod","retainOnDelete":"false"}',
        }
    )
    s = load_settings(raw)
    assert (s.nodes, s.namespace_mode, s.storage.mode) == (4, "reference", "per-pod")
    assert s.storage.retain_on_delete is False


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, ["gpu-cluster:platform: required"]),
        ({"platform": "aws"}, ["gpu-cluster:platform = 'aws'", "'openshift' or 'gke'"]),
        ({"platform": "openshift", "nodes": "two"}, ["gpu-cluster:nodes = 'two'", "valid integer"]),
        (
            {"platform": "openshift", "nodes": 0},
            ["gpu-cluster:nodes = 0", "greater than or equal to 1"],
        ),
        ({"platform": "openshift", "nodez": 2}, ["gpu-cluster:nodez: unknown key", "nodes"]),
        (
            {"platform": "openshift", "storage": {"mode": "rwxx"}},
            ["gpu-cluster:storage.mode = 'rwxx'", "'rwx' or 'per-pod'"],
        ),
        (
            {"platform": "openshift", "storage": {"sise": "1Gi"}},
            ["gpu-cluster:storage.sise: unknown key", "workspaceSize"],
        ),
        (
            {"platform": "openshift", "storage": {"workspaceSize": "100GB"}},
            ["gpu-cluster:storage.workspaceSize = '100GB'", "Kubernetes quantity"],
        ),
        (
            {"platform": "openshift", "image": "nvcr.io/nvidia/pytorch"},
            ["gpu-cluster:image", "tag"],
        ),
        ({"platform": "openshift", "image": "pytorch:latest"}, ["gpu-cluster:image", "mutable"]),
        ({"platform": "openshift", "namespace": "Bad_NS"}, ["gpu-cluster:namespace", "DNS-1123"]),
        (
            {"platform": "openshift", "networkMode": "tcpxo"},
            ["gpu-cluster:networkMode = 'tcpxo'", "'tcp', 'rdma'"],
        ),
        ({"platform": "openshift", "networkMode": "rdma"}, ["gpu-cluster:rdma is required"]),
        (
            {"platform": "openshift", "kubernetesVersion": "1.27"},
            ["gpu-cluster:kubernetesVersion", "1.28"],
        ),
        (
            {"platform": "openshift", "launcher": {"minNodes": 3}},
            ["gpu-cluster:launcher.minNodes/maxNodes = 3:2"],
        ),
        (
            {"platform": "openshift", "openshift": {"nodeNames": ["gpu-1"]}},
            ["gpu-cluster:openshift.nodeNames lists 1 nodes but nodes = 2"],
        ),
        (
            {"platform": "openshift", "nodes": 1, "openshift": {"nodeNames": ["gpu-1", "gpu-1"]}},
            ["lists a node twice"],
        ),
        (
            {"platform": "openshift", "openshift": {"nodeNames": ["GPU_1", "gpu-2"]}},
            ["gpu-cluster:openshift.nodeNames[0] = 'GPU_1'", "node name"],
        ),
        (
            {"platform": "openshift", "tcp": {"socketNthreads": 16, "nsocksPerThread": 8}},
            ["tcp.socketNthreads x tcp.nsocksPerThread must be <= 64"],
        ),
        (
            {"platform": "openshift", "gcp": GCP},
            ["gpu-cluster:gcp is only used when platform is 'gke'"],
        ),
    ],
)
def test_bad_config_names_the_key_and_what_is_allowed(
    raw: dict[str, Any], expected: list[str]
) -> None:
    message = error_of(raw)
    for fragment in expected:
        assert fragment in message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (rdma(nic(subnet="10.0.103.7/24")), "gpu-cluster:rdma.nics[0].subnet = '10.0.103.7/24'"),
        (rdma(nic(flavour="ipvlan")), "gpu-cluster:rdma.nics[0].flavour = 'ipvlan'"),
        (rdma(nic(flavour="macvlan")), "rdma.nics[0].master is required for flavour 'macvlan'"),
        (rdma(nic(master="eno5np0")), "flavour 'sriov' takes its device from 'resource'"),
        # Multus hands host-device the allocated device; a fixed one would override it.
        (
            rdma(nic(flavour="host-device", master="eno5np0")),
            "flavour 'host-device' takes its device from 'resource'",
        ),
        (rdma(nic(resource="eno5np0rdma")), "gpu-cluster:rdma.nics[0].resource"),
        (rdma(NIC, nic(interface="net2", network="b", subnet="10.0.103.128/25")), "overlaps"),
        (
            rdma(NIC, nic(network="b", subnet="10.0.104.0/24")),
            "interface net1 used by more than one NIC",
        ),
        (
            rdma(nic(hca="mlx5_6"), nic(interface="net2", network="b", subnet="10.0.104.0/24")),
            "for every NIC or for none",
        ),
        (rdma(NIC, gidIndex="three"), "gpu-cluster:rdma.gidIndex"),
        (rdma(NIC, gdrLevel="5"), "gpu-cluster:rdma.gdrLevel = '5'"),
        (rdma(NIC, crossNic=3), "gpu-cluster:rdma.crossNic = 3"),
        (rdma(NIC, qpsPerConnection=129), "gpu-cluster:rdma.qpsPerConnection = 129"),
        (
            {**rdma(), "platform": "gke", "gcp": GCP},
            "gpu-cluster:rdma is only used when platform is 'openshift'",
        ),
    ],
)
def test_rdma_rules(raw: dict[str, Any], expected: str) -> None:
    assert expected in error_of(raw)


# A second NIC on its own network, interface and subnet.
NIC2 = {"interface": "net2", "network": "eno6np0-network", "subnet": "10.0.104.0/24"}


@pytest.mark.parametrize("flavour", ["sriov", "host-device"])
def test_nics_that_take_a_device_from_a_pool_need_one_pool_each(flavour: str) -> None:
    """Multus hands each NIC of one resource the next device the kubelet allocated from it
    (multus-cni pkg/k8sclient/k8sclient.go getKubernetesDelegate), so which rail's port gets
    which NIC's subnet is left to chance."""
    pool = "nvidia.com/hostdev"
    message = error_of(
        rdma(nic(flavour=flavour, resource=pool), nic(flavour=flavour, resource=pool, **NIC2))
    )
    assert "gpu-cluster:rdma.nics[0].resource = rdma.nics[1].resource = 'nvidia.com/hostdev'" in (
        message
    )
    assert "a resource of its own" in message
    # A pool of its own per NIC is what rail-optimised setups run.
    own = rdma(nic(flavour=flavour), nic(flavour=flavour, resource="openshift.io/b", **NIC2))
    assert load_settings(own).rdma is not None


def test_macvlan_nics_may_share_the_rdma_shared_device_plugins_resource() -> None:
    """A macvlan NIC names its port itself (master); the shared device plugin allocates none."""
    shared = {"flavour": "macvlan", "resource": "rdma/rdma_shared_device_a"}
    raw = rdma(nic(master="eno5np0", **shared), nic(master="eno6np0", **shared, **NIC2))
    assert load_settings(raw).rdma is not None


def test_rdma_gid_index_accepts_auto_nccl_or_a_number() -> None:
    for value in ("auto", "nccl", 3):
        assert load_settings(rdma(NIC, gidIndex=value)).rdma is not None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"platform": "gke", "networkMode": "tcpxo"}, "gpu-cluster:gcp is required"),
        (
            gke(machineType="a3-highgpu-8g"),
            "networkMode = 'tcpxo' needs gcp.machineType 'a3-megagpu-8g'",
        ),
        (gke("tcpx"), "networkMode = 'tcpx' needs gcp.machineType 'a3-highgpu-8g'"),
        (gke(machineType="a3-edgegpu-8g"), "gpu-cluster:gcp.machineType = 'a3-edgegpu-8g'"),
        (
            gke(machineType="a3-ultragpu-8g"),
            "networkMode = 'tcpxo' needs gcp.machineType 'a3-megagpu-8g', not 'a3-ultragpu-8g'",
        ),
        ({**gke(), "gpusPerNode": 16}, "gpusPerNode = 16: a3-megagpu-8g has 8 GPUs"),
        ({**gke(), "gpusPerNode": 4}, "serves whole machines; set it to 8"),
        (gke(zone="us-east1-b"), "zone 'us-east1-b' is not in region 'us-central1'"),
        (gke(provisioning="reservation"), "provisioning 'reservation' needs 'reservation'"),
        (gke(reservation="r1"), "gcp.reservation is only used when gcp.provisioning is"),
        (
            gke(provisioning="reservation", reservation="r", placementMaxDistance=2),
            "brings its own placement",
        ),
        (gke(provisioning="spot", maintenanceInterval="PERIODIC"), "maintenanceInterval applies"),
        (gke(baseCidr="10.0.0.0/16"), "gpu-cluster:gcp.baseCidr = '10.0.0.0/16'"),
        (gke(baseCidr="10.0.0.1/8"), "gpu-cluster:gcp.baseCidr = '10.0.0.1/8'"),
        (gke(minMasterVersion="1.31.1-gke.100"), "use 1.31.14-gke.1243000 or newer"),
        (
            gke(minMasterVersion="1.40"),
            "gpu-cluster:gcp.minMasterVersion = '1.40': GKE 1.40 is not in",
        ),
        (
            gke(gpudirectRelease="tcpx-v3.1.12"),
            "is not a known tcpxo release; allowed: 'tcpxo-2026-01-09', 'tcpxo-v1.0.17'",
        ),
        (gke(project="My_Project"), "gpu-cluster:gcp.project = 'My_Project'"),
        # The control plane: every GKE stack names who may reach it, and never nobody.
        (gke(authorizedNetworks=None), "gpu-cluster:gcp.authorizedNetworks is required"),
        (gke(authorizedNetworks=[]), "gpu-cluster:gcp.authorizedNetworks is empty"),
        (
            gke(authorizedNetworks=[{"cidrBlock": "203.0.113.0/24"}]),
            "gpu-cluster:gcp.authorizedNetworks[0].displayName: required",
        ),
        ({**gke(), "kubernetesVersion": "1.28"}, "native sidecar"),
        (
            {**gke("tcp"), "openshift": {"nodeNames": ["a", "b"]}},
            "only used when platform is 'openshift'",
        ),
    ],
)
def test_gke_rules(raw: dict[str, Any], expected: str) -> None:
    assert expected in error_of(raw)


@pytest.mark.parametrize("machine", ["a4-highgpu-8g", "a3-ultragpu-8g"])
def test_a3_ultra_and_a4_are_refused_on_demand_capacity(machine: str) -> None:
    for raw, default in (
        (gke("rdma", machineType=machine, zone="us-central1-b"), " (the default)"),
        (gke("rdma", machineType=machine, zone="us-central1-b", provisioning="on-demand"), ""),
    ):
        message = error_of(raw)
        assert f"gpu-cluster:gcp.provisioning = 'on-demand'{default}: Google offers" in message
        assert f"gcp.machineType '{machine}' only as 'flex-start', 'reservation' or 'spot'" in (
            message
        )
    for provisioning, extra in (
        ("flex-start", {}),
        ("spot", {}),
        ("reservation", {"reservation": "a4-res/reservationBlocks/block-1"}),
    ):
        raw = gke("rdma", machineType=machine, zone="us-central1-b", provisioning=provisioning)
        s = load_settings({**raw, "gcp": {**raw["gcp"], **extra}})
        assert s.gcp is not None and s.gcp.provisioning == provisioning


def test_a3_mega_and_high_may_still_run_on_demand() -> None:
    for mode, machine in (("tcpxo", "a3-megagpu-8g"), ("tcpx", "a3-highgpu-8g")):
        s = load_settings(gke(mode, machineType=machine))
        assert s.gcp is not None and s.gcp.provisioning == "on-demand"


def _ranges(count: int) -> list[dict[str, str]]:
    return [{"cidrBlock": f"198.51.{i}.0/24", "displayName": f"r{i}"} for i in range(count)]


def test_authorized_ranges_stop_at_what_gke_takes() -> None:
    # 50 on a cluster with public nodes, 100 on a private one (GKE's documented limits).
    load_settings(gke(authorizedNetworks=_ranges(100)))
    assert "lists 101 ranges; GKE takes at most 100 on a private cluster" in error_of(
        gke(authorizedNetworks=_ranges(101))
    )
    load_settings(gke(authorizedNetworks=_ranges(50), privateNodes=False))
    assert "at most 50 on a cluster with public nodes" in error_of(
        gke(authorizedNetworks=_ranges(51), privateNodes=False)
    )


def test_valid_gke_variants_load() -> None:
    assert load_settings(gke()).gcp is not None
    assert load_settings({**gke("tcpx", machineType="a3-highgpu-8g")}).network_mode == "tcpx"
    assert load_settings(gke("tcp", machineType="a3-highgpu-8g")).network_mode == "tcp"
    spot = load_settings(gke(provisioning="spot"))
    assert spot.gcp is not None and spot.gcp.provisioning == "spot"


def test_every_problem_is_reported_at_once() -> None:
    message = error_of(
        {"platform": "openshift", "nodes": "x", "storage": {"mode": "nfs"}, "typo": 1}
    )
    assert "gpu-cluster:nodes" in message
    assert "gpu-cluster:storage.mode" in message
    assert "gpu-cluster:typo" in message


def openshift(**extra: Any) -> dict[str, Any]:
    return {"platform": "openshift", **extra}


# Class: accepted here, refused at apply time by Kubernetes or GCP. Each case is a value the API
# server or GCP refuses; the schema must refuse it first, naming the key.
APPLY_TIME_LIMITS: list[tuple[str, dict[str, Any], list[str]]] = [
    # controller-revision-hash=<name>-<10-char hash> must stay a 63-character label value
    ("statefulset-name", openshift(name="a" * 53), ["gpu-cluster:name", "at most 52"]),
    ("gke-cluster-name", {**gke(), "name": "a" * 41}, ["gpu-cluster:name", "at most 40"]),
    ("storage-class", openshift(storage={"storageClass": "Fast_SSD"}), ["storage.storageClass"]),
    ("label-key", openshift(openshift={"gpuNodeLabel": "-bad/key"}), ["openshift.gpuNodeLabel"]),
    # IsQualifiedName: "prefix part must be non-empty" when a '/' is written
    ("label-key-empty-prefix", openshift(openshift={"gpuNodeLabel": "/gpu"}), ["gpuNodeLabel"]),
    (
        "label-key-name-part",
        openshift(openshift={"gpuNodeLabel": "nvidia.com/" + "g" * 64}),
        ["openshift.gpuNodeLabel"],
    ),
    (
        "cpu-request-above-limit",
        openshift(pod={"cpuRequest": "65", "cpuLimit": "64"}),
        ["gpu-cluster:pod", "cpuRequest 65 is above cpuLimit 64"],
    ),
    (
        "memory-request-above-limit",
        openshift(pod={"memoryRequest": "300Gi", "memoryLimit": "256Gi"}),
        ["gpu-cluster:pod", "memoryRequest 300Gi is above memoryLimit 256Gi"],
    ),
    (
        "memory-request-above-limit-mixed-units",
        openshift(pod={"memoryRequest": "2G", "memoryLimit": "1Gi"}),
        ["memoryRequest 2G is above memoryLimit 1Gi"],
    ),
    ("negative-quantity", openshift(pod={"cpuRequest": "-1"}), ["pod.cpuRequest", "negative"]),
    ("zero-size-claim", openshift(storage={"workspaceSize": "0"}), ["storage.workspaceSize"]),
    ("zero-size-datasets", openshift(storage={"datasetsSize": "0Gi"}), ["storage.datasetsSize"]),
    ("public-rdma-subnet", rdma(nic(subnet="8.8.8.0/24")), ["rdma.nics[0].subnet", "private"]),
    ("link-local-subnet", rdma(nic(subnet="169.254.0.0/24")), ["rdma.nics[0].subnet"]),
    ("public-base-cidr", gke(baseCidr="11.0.0.0/8"), ["gcp.baseCidr", "private"]),
    (
        "duplicate-hca",
        rdma(
            nic(hca="mlx5_0"),
            nic(interface="net2", network="n2", subnet="10.0.104.0/24", hca="mlx5_0"),
        ),
        ["rdma.nics: hca mlx5_0 used by more than one NIC"],
    ),
    ("nic-named-eth0", rdma(nic(interface="eth0")), ["rdma.nics[0].interface = 'eth0'"]),
    ("nic-named-lo", rdma(nic(interface="lo")), ["rdma.nics[0].interface = 'lo'"]),
    (
        "nic-named-like-bootstrap",
        rdma(nic(interface="net1"), bootstrapInterface="net1"),
        ["rdma.nics[0].interface = 'net1'", "bootstrap"],
    ),
    (
        "subnet-too-small",
        {**rdma(nic(subnet="10.0.103.0/30")), "nodes": 3},
        ["rdma.nics[0].subnet 10.0.103.0/30 has 2 usable addresses for 3 pods"],
    ),
    (
        "unreachable-busbw",
        {**gke(), "verify": {"expectedBusbwGbps": 250}},
        ["verify.expectedBusbwGbps = 250", "never pass"],
    ),
    (
        "gdr-on-sockets",
        openshift(verify={"requireGdr": True}),
        ["verify.requireGdr"],
    ),
    ("sweep-below-minimum", openshift(verify={"maxBytes": "4"}), ["verify.maxBytes = '4'"]),
    (
        "code-sync-sidecar-needs-1.29",
        openshift(kubernetesVersion="1.28", codeSync={"repo": "https://example.com/r.git"}),
        ["gpu-cluster:kubernetesVersion = '1.28'", "codeSync", "1.29"],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(raw, expected) for _, raw, expected in APPLY_TIME_LIMITS],
    ids=[case for case, _, _ in APPLY_TIME_LIMITS],
)
def test_what_kubernetes_or_gcp_refuses_at_apply_time_is_refused_here(
    raw: dict[str, Any], expected: list[str]
) -> None:
    message = error_of(raw)
    for fragment in expected:
        assert fragment in message, message


# The converse: nothing Kubernetes accepts is refused.
ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("plain-integer-cpu", openshift(pod={"cpuRequest": 32, "cpuLimit": 64})),
    ("plain-integer-storage", openshift(storage={"workspaceSize": 107374182400})),
    ("decimal-exponent", openshift(pod={"memoryRequest": "1e9", "memoryLimit": "2E9"})),
    ("exa-suffixes", openshift(pod={"memoryLimit": "1E"}, storage={"workspaceSize": "7Ei"})),
    ("millicores", openshift(pod={"cpuRequest": "500m", "cpuLimit": "1"})),
    ("fractional-quantity", openshift(pod={"cpuRequest": ".5", "cpuLimit": "1.5"})),
    ("namespace-starting-with-a-digit", openshift(namespace="0-team")),
    ("statefulset-name-at-the-limit", openshift(name="a" * 52)),
    ("gke-name-at-the-limit", {**gke(), "name": "a" * 40}),
    ("storage-class-subdomain", openshift(storage={"storageClass": "ceph.rbd-fast"})),
    ("label-key-without-prefix", openshift(openshift={"gpuNodeLabel": "gpu"})),
    ("shared-address-space", rdma(nic(subnet="100.64.0.0/24"))),
    (
        "credentials-secret-starting-with-a-digit",
        openshift(codeSync={"repo": "https://example.com/r.git", "credentialsSecret": "1-token"}),
    ),
]


@pytest.mark.parametrize("raw", [raw for _, raw in ACCEPTED], ids=[case for case, _ in ACCEPTED])
def test_nothing_kubernetes_accepts_is_refused(raw: dict[str, Any]) -> None:
    """Taken, and every value kept as written (a plain number given as a quantity as its
    string, the form Kubernetes writes quantities in)."""
    held = load_settings(raw).model_dump(by_alias=True, mode="json")
    for path, value in written(raw):
        kept: Any = held
        for part in path:
            kept = kept[part]
        as_quantity = isinstance(value, int) and kept == str(value)
        assert kept == value or as_quantity, (path, value, kept)


def written(raw: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], Any]]:
    """(path, value) of every scalar in a raw config."""
    if isinstance(raw, dict):
        return [leaf for key, value in raw.items() for leaf in written(value, (*path, key))]
    if isinstance(raw, list):
        return [leaf for i, value in enumerate(raw) for leaf in written(value, (*path, i))]
    return [(path, raw)]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("32", 32),
        ("500m", 0.5),
        ("1Ki", 1024),
        ("1e3", 1000),
        ("1.5G", 1.5e9),
        (".5", 0.5),
        ("1E", 10**18),
        ("7Ei", 7 * 2**60),
    ],
)
def test_quantities_parse_as_the_api_server_reads_them(text: str, value: float) -> None:
    assert parse_quantity(text) == value
