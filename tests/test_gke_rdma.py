"""GKE GPUDirect RDMA (A3 Ultra, A4) through the real program: the RoCE VPC, the node pool's NIC
order, the network objects, the gIB installer, the pod pieces and the NCCL settings."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from gpu_cluster.offline.engine import ProgramRun
from tests.conftest import (
    A4_WITHOUT_QUEUED,
    container,
    env_of,
    manifests,
    pod_spec,
    pod_template,
    run_stack,
)
from tests.edits import A4_STATEFULSET

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
# Where gIB's installer puts set_nccl_env.sh, which Google's workloads source (GoogleCloudPlatform/
# container-engine-accelerators gpudirect-rdma/nccl-test.yaml, 992db81).
GIB_SCRIPT = "/usr/local/gib/scripts/set_nccl_env.sh"
# Both machines, through the shipped A4 stack and the same stack switched to A3 Ultra.
MACHINES = [
    ("a4-highgpu-8g", ()),
    ("a3-ultragpu-8g", ("gcp.machineType=a3-ultragpu-8g",)),
]
# GKE's accelerator types (cloud.google.com/kubernetes-engine/docs/how-to/gpus; cluster-toolkit
# examples/gke-a4/gke-a4.yaml and gke-a3-ultragpu/gke-a3-ultragpu.yaml, 1047080).
GKE_ACCELERATOR = {"a4-highgpu-8g": "nvidia-b200", "a3-ultragpu-8g": "nvidia-h200-141gb"}


def inputs(run: ProgramRun, type_: str) -> list[dict[str, Any]]:
    return [r.inputs for r in run.of_type(type_)]


def gpu_pool(run: ProgramRun) -> dict[str, Any]:
    (pool,) = [p for p in inputs(run, "gcp:container/nodePool:NodePool") if p["name"] != "system"]
    return pool


@pytest.mark.parametrize(("machine", "overrides"), MACHINES)
def test_every_rdma_nic_is_wired_end_to_end(machine: str, overrides: tuple[str, ...]) -> None:
    """subnet -> node network -> Network object -> pod interface -> NCCL."""
    run = run_stack("gcp-a4", *overrides)
    subnets = {s["name"]: s for s in inputs(run, SUBNET)}
    pool = gpu_pool(run)
    assert pool["nodeConfig"]["machineType"] == machine
    (accelerator,) = pool["nodeConfig"]["guestAccelerators"]
    assert accelerator["type"] == GKE_ACCELERATOR[machine]
    node_nics = pool["networkConfig"]["additionalNodeNetworkConfigs"]
    # Google's order: the second gVNIC, then the RDMA subnets 0..7 (node NICs eth1..eth9).
    assert node_nics == [
        {"network": "gpu-cluster-gpu1", "subnetwork": "gpu-cluster-gpu1"},
        *({"network": "gpu-cluster-rdma", "subnetwork": f"gpu-cluster-rdma-{i}"} for i in range(8)),
    ]
    assert all(nic["subnetwork"] in subnets for nic in node_nics)
    params = {p["metadata"]["name"]: p["spec"] for p in manifests(run, "GKENetworkParamSet")}
    networks = {n["metadata"]["name"]: n["spec"] for n in manifests(run, "Network")}
    annotations = pod_template(run)["metadata"]["annotations"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert [i["interfaceName"] for i in interfaces] == [f"eth{n}" for n in range(10)]
    for iface, node_nic in zip(interfaces[1:], node_nics, strict=True):
        network = networks[iface["network"]]
        assert network["type"] == "Device"
        param = params[network["parametersRef"]["name"]]
        assert (param["vpc"], param["vpcSubnet"]) == (node_nic["network"], node_nic["subnetwork"])
        rdma = node_nic["network"] == "gpu-cluster-rdma"
        assert param["deviceMode"] == ("RDMA" if rdma else "NetDevice")
    env = env_of(container(run))
    assert env["NCCL_INIT_SCRIPT"] == GIB_SCRIPT
    nccl = {k: v for k, v in env.items() if k.startswith("NCCL_") and k != "NCCL_ENV_FILE"}
    # What AI-Hypercomputer/gpu-recipes' jobset for the machine exports after the script
    # (src/helm-charts/{a4,a3ultra}/jobset/templates/workload-jobset.yaml, 2e1fd5e): on A4,
    # bootstrap over the two gVNICs (the pod's eth0 and the gvnic network's interface) and A4's
    # tuner file; on A3 Ultra nothing, the script's own values hold.
    gvnic = [i["interfaceName"] for i in interfaces if i["network"] in ("default", "gvnic-1")]
    after = (
        {
            "NCCL_SOCKET_IFNAME": ",".join(gvnic),
            "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a4.txtpb",
        }
        if machine == "a4-highgpu-8g"
        else {}
    )
    assert nccl == {"NCCL_DEBUG": "WARN", "NCCL_INIT_SCRIPT": GIB_SCRIPT, **after}


def test_roce_vpc_has_the_zone_profile_google_mtu_a_subnet_per_nic_and_no_firewall() -> None:
    run = run_stack("gcp-a4")
    vpcs = {n["name"]: n for n in inputs(run, NETWORK)}
    rdma = vpcs["gpu-cluster-rdma"]
    assert rdma["networkProfile"] == (
        "projects/my-gpu-project/global/networkProfiles/us-central1-b-vpc-roce"
    )
    assert rdma["mtu"] == 8896 and rdma["routingMode"] == "REGIONAL"
    assert rdma["autoCreateSubnetworks"] is False
    # The host and second gVNIC VPCs carry the same MTU on A3 Ultra / A4.
    assert {v["mtu"] for v in vpcs.values()} == {8896}
    assert sorted(vpcs) == ["gpu-cluster-gpu1", "gpu-cluster-host", "gpu-cluster-rdma"]
    rdma_subnets = [s for s in inputs(run, SUBNET) if s["name"].startswith("gpu-cluster-rdma-")]
    assert len(rdma_subnets) == 8
    assert {s["region"] for s in rdma_subnets} == {"us-central1"}
    ranges = [ipaddress.ip_network(s["ipCidrRange"]) for s in inputs(run, SUBNET)]
    assert all(not a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    # RoCE VPCs take no VPC firewall rules: only the host and gVNIC VPCs have one.
    assert sorted(f["name"] for f in inputs(run, FIREWALL)) == [
        "gpu-cluster-gpu1-internal",
        "gpu-cluster-host-internal",
    ]


@pytest.mark.parametrize(("machine", "overrides"), MACHINES)
def test_rdma_pool_boots_cos_on_hyperdisk_with_gvnic(
    machine: str, overrides: tuple[str, ...]
) -> None:
    config = gpu_pool(run_stack("gcp-a4", *overrides))["nodeConfig"]
    assert config["imageType"] == "COS_CONTAINERD"  # RDMA needs COS (Ubuntu unsupported)
    assert config["diskType"] == "hyperdisk-balanced"
    assert config["gvnic"] == {"enabled": True}


# Google's GKE installer as of container-engine-accelerators 992db812 (2026-06-11):
# gpudirect-rdma/nccl-rdma-installer.yaml runs gIB v1.1.1 with `install` alone (2da1c92f
# removed `--install-nccl`); v1.1.0 ran with it (209d1af0).
GIB_INSTALLER = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib"


def test_gib_installer_daemonset_runs_googles_current_release_on_a3_ultra_and_a4_nodes() -> None:
    run = run_stack("gcp-a4")
    daemons = {d["metadata"]["name"]: d for d in manifests(run, "DaemonSet")}
    # Only the gIB installer: no TCPX(O) installer and no device injector.
    assert sorted(daemons) == ["nccl-rdma-installer"]
    installer = daemons["nccl-rdma-installer"]
    assert installer["metadata"]["namespace"] == "kube-system"
    spec = installer["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["image"] == f"{GIB_INSTALLER}:v1.1.1"
    assert "/scripts/container_entry.sh install\n" in init["args"][0]
    assert "--install-nccl" not in init["args"][0]
    expr = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"][0]
    assert expr["values"] == ["nvidia-h200-141gb", "nvidia-b200"]


def test_training_pod_mounts_gib_read_only_with_no_sidecar_and_no_capability() -> None:
    run = run_stack("gcp-a4")
    spec = pod_spec(run)
    assert "initContainers" not in spec
    assert "hostNetwork" not in spec
    training = container(run)
    assert training["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "add" not in training["securityContext"]["capabilities"]
    mounts = {m["mountPath"]: m for m in training["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for pod_dir, host_dir in (
        ("/usr/local/gib", "/home/kubernetes/bin/gib"),
        ("/usr/local/nvidia", "/home/kubernetes/bin/nvidia"),
    ):
        assert mounts[pod_dir]["readOnly"] is True
        assert volumes[mounts[pod_dir]["name"]]["hostPath"]["path"] == host_dir
    env = env_of(training)
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    # Its NCCL settings are the release's script, from the read-only gib mount.
    assert env["NCCL_INIT_SCRIPT"].startswith(mounts["/usr/local/gib"]["mountPath"] + "/")


def test_fabric_check_requires_gib_and_the_sourced_floor() -> None:
    command = run_stack("gcp-a4", *A4_STATEFULSET).outputs["verifyCommand"]
    assert "--expected-transport gib" in command
    assert "--expected-busbw-gbps 250 " in command  # cluster-health-scanner's A4 floor
    assert "--max-bytes 8G " in command


def test_flex_start_pool_scales_from_zero_without_reservation_placement_or_repair() -> None:
    run = run_stack("gcp-a4", "gcp.queuedProvisioning=false", "gcp.maxRunDurationSeconds=86400")
    pool = gpu_pool(run)
    config = pool["nodeConfig"]
    assert config["flexStart"] is True and config["maxRunDuration"] == "86400s"
    assert config["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert "spot" not in config
    assert "nodeCount" not in pool
    assert pool["autoscaling"] == {
        "totalMinNodeCount": 0,
        "totalMaxNodeCount": 2,  # the stack's nodes
        "locationPolicy": "ANY",
    }
    assert pool["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert "placementPolicy" not in pool


@pytest.mark.parametrize(
    "reservation",
    [
        "a4-res/reservationBlocks/block-1",
        "projects/my-gpu-project/reservations/a4-res/reservationBlocks/b1/reservationSubBlocks/s2",
    ],
)
def test_reservation_block_or_sub_block_is_consumed_in_the_pools_zone(reservation: str) -> None:
    pool = gpu_pool(
        run_stack(
            "gcp-a4",
            A4_WITHOUT_QUEUED,
            "gcp.provisioning=reservation",
            f"gcp.reservation={reservation}",
        )
    )
    # Always the full path, as cluster-toolkit builds it (modules/compute/gke-node-pool
    # reservation_definitions.tf, 1047080): projects/<p>/reservations/<r>[/reservationBlocks/...].
    assert pool["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": [
            reservation
            if reservation.startswith("projects/")
            else f"projects/my-gpu-project/reservations/{reservation}"
        ],
    }
    assert pool["nodeLocations"] == ["us-central1-b"]
    assert "placementPolicy" not in pool and pool["nodeCount"] == 2


def test_a_whole_reservation_leaves_the_pool_in_the_clusters_zone() -> None:
    pool = gpu_pool(
        run_stack(
            "gcp-a4", A4_WITHOUT_QUEUED, "gcp.provisioning=reservation", "gcp.reservation=a4-res"
        )
    )
    assert pool["nodeConfig"]["reservationAffinity"]["values"] == [
        "projects/my-gpu-project/reservations/a4-res"
    ]
    assert "nodeLocations" not in pool


def test_gib_v1_1_0_stays_selectable_with_its_own_installer_flags() -> None:
    """A stack file that pins gib-v1.1.0 keeps rendering it: its image and `--install-nccl`."""
    default = run_stack("gcp-a4")
    pinned = run_stack("gcp-a4", "gcp.gpudirectRelease=gib-v1.1.0")
    (installer,) = manifests(pinned, "DaemonSet")
    (init,) = installer["spec"]["template"]["spec"]["initContainers"]
    assert init["image"] == f"{GIB_INSTALLER}:v1.1.0"
    assert "/scripts/container_entry.sh install --install-nccl\n" in init["args"][0]
    # Each release's settings are its own set_nccl_env.sh, at the same place in the pod.
    assert env_of(container(default)) == env_of(container(pinned))
    assert env_of(container(pinned))["NCCL_INIT_SCRIPT"] == GIB_SCRIPT
