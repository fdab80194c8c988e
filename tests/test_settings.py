"""The stack-config schema: every rule rejects what it should, naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from components.settings import ConfigError, decode_config, load_settings

GCP = {"project": "my-gpu-project", "region": "us-central1", "zone": "us-central1-a"}
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
    return {"platform": "gke", "networkMode": mode, "gcp": {**GCP, **gcp}}


def error_of(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(raw)
    return str(info.value)


def test_minimal_openshift_stack_gets_documented_defaults() -> None:
    s = load_settings({"platform": "openshift"})
    assert (s.nodes, s.gpus_per_node, s.network_mode) == (2, 8, "tcp")
    assert s.storage.retain_on_delete is True
    assert s.world_size == 16


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
        ({"platform": "openshift", "namespace": "Bad_NS"}, ["gpu-cluster:namespace", "DNS-1035"]),
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
        (rdma(nic(flavour="macvlan")), "flavour 'macvlan' needs 'master'"),
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
            "networkMode = 'rdma' is not available on platform 'gke'",
        ),
    ],
)
def test_rdma_rules(raw: dict[str, Any], expected: str) -> None:
    assert expected in error_of(raw)


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
        (gke(machineType="a3-ultragpu-8g"), "gpu-cluster:gcp.machineType = 'a3-ultragpu-8g'"),
        ({**gke(), "gpusPerNode": 16}, "gpusPerNode = 16: a3-megagpu-8g has 8 GPUs"),
        ({**gke(), "gpusPerNode": 4}, "serves whole machines; set it to 8"),
        (gke(zone="us-east1-b"), "zone 'us-east1-b' is not in region 'us-central1'"),
        (gke(provisioning="reservation"), "provisioning 'reservation' needs 'reservation'"),
        (gke(reservation="r1"), "'reservation' is only used with provisioning 'reservation'"),
        (
            gke(provisioning="reservation", reservation="r", placementMaxDistance=2),
            "brings its own placement",
        ),
        (gke(provisioning="spot", maintenanceInterval="PERIODIC"), "maintenanceInterval applies"),
        (gke(baseCidr="10.0.0.0/16"), "gpu-cluster:gcp.baseCidr = '10.0.0.0/16'"),
        (gke(baseCidr="10.0.0.1/8"), "gpu-cluster:gcp.baseCidr = '10.0.0.1/8'"),
        (gke(minMasterVersion="1.31.1-gke.100"), "use 1.31.14-gke.1243000 or newer"),
        (gke(minMasterVersion="1.32"), "gpu-cluster:gcp.minMasterVersion = '1.32'"),
        (
            gke(gpudirectRelease="tcpx-v3.1.12"),
            "is not a known tcpxo release; allowed: 'tcpxo-2026-01-09'",
        ),
        (gke(project="My_Project"), "gpu-cluster:gcp.project = 'My_Project'"),
        ({**gke(), "kubernetesVersion": "1.28"}, "native sidecar"),
        (
            {**gke("tcp"), "openshift": {"nodeNames": ["a", "b"]}},
            "only used when platform is 'openshift'",
        ),
    ],
)
def test_gke_rules(raw: dict[str, Any], expected: str) -> None:
    assert expected in error_of(raw)


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
