"""The GKE stacks through the real program: networks, cluster, A3 pool, GPUDirect wiring."""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Any

import pytest

from gpu_cluster.components.gke import GkePlatform
from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.dates import AsOf
from gpu_cluster.config.loading import (
    decode_config,
    load_settings,
    settings_from,
    validate_settings,
)
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.config.netmodes.gpudirect_tcp import gpudirect_release
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.gpudirect import gke_minor, releases_for
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.replacements import Step, plan
from gpu_cluster.offline.stack_files import engine_config
from gpu_cluster.plan.gke_identity import node_account_id
from tests.as_of import AS_OF
from tests.conftest import (
    container,
    env_of,
    manifests,
    one,
    other_warnings,
    pod_spec,
    rows,
    run_stack,
)


def gcp_inputs(run: ProgramRun, type_: str) -> list[dict[str, Any]]:
    return [r.inputs for r in run.of_type(type_)]


def pools(run: ProgramRun) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in gcp_inputs(run, "gcp:container/nodePool:NodePool")}


def gpu_pool(run: ProgramRun) -> dict[str, Any]:
    (pool,) = [p for name, p in pools(run).items() if name != "system"]
    return pool


def test_cluster_is_vpc_native_multi_network_dataplane_v2_without_default_pool() -> None:
    (cluster,) = gcp_inputs(run_stack("gcp-a3"), "gcp:container/cluster:Cluster")
    assert cluster["networkingMode"] == "VPC_NATIVE"
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    assert cluster["enableMultiNetworking"] is True
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["deletionProtection"] is True
    assert cluster["location"] == "us-central1-a"
    assert cluster["minMasterVersion"] == "1.35"
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}


@pytest.mark.parametrize("stack", ["gcp-a3", "a3-high", "gcp-a4"])
def test_control_plane_accepts_only_the_authorized_ranges(stack: str) -> None:
    (cluster,) = gcp_inputs(run_stack(stack), "gcp:container/cluster:Cluster")
    assert cluster["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "kubectl-access-network"}],
        "gcpPublicCidrsAccessEnabled": False,
    }
    # Public endpoint (behind the list), private nodes.
    assert cluster["privateClusterConfig"]["enablePrivateEndpoint"] is False
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True


def test_authorized_ranges_come_from_config_in_order() -> None:
    run = run_stack(
        "gcp-a3",
        "gcp.authorizedNetworks[1].cidrBlock=198.51.100.7/32",
        "gcp.authorizedNetworks[1].displayName=ci-runner",
    )
    (cluster,) = gcp_inputs(run, "gcp:container/cluster:Cluster")
    assert cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [
        {"cidrBlock": "203.0.113.0/24", "displayName": "kubectl-access-network"},
        {"cidrBlock": "198.51.100.7/32", "displayName": "ci-runner"},
    ]


def test_a_cluster_nobody_may_reach_is_refused_before_anything_is_registered() -> None:
    """A stack file must say who reaches the control plane; so must Settings built in code
    before they create a cluster (a program adding a pool to an existing one need not)."""
    built = settings_of("gcp-a3").model_dump(by_alias=True, exclude_unset=True)
    del built["gcp"]["authorizedNetworks"]
    settings = validate_settings(built)  # what examples/a3-mega-pool does
    with pytest.raises(ConfigError, match=r"gcp\.authorizedNetworks is required"):
        GkePlatform("gpu-cluster", settings)
    with pytest.raises(ConfigError, match=r"gcp\.authorizedNetworks is required"):
        load_settings(built)


@pytest.mark.parametrize("stack", ["gcp-a3", "a3-high", "gcp-a4"])
def test_nodes_run_as_their_own_account_and_pods_as_their_workload_identity(stack: str) -> None:
    run = run_stack(stack)
    (account,) = gcp_inputs(run, "gcp:serviceaccount/account:Account")
    assert account == {
        "accountId": "gpu-cluster-nodes",
        "project": "my-gpu-project",
        "displayName": "GKE nodes of gpu-cluster",
    }
    email = "gpu-cluster-nodes@my-gpu-project.iam.gserviceaccount.com"
    bindings = gcp_inputs(run, "gcp:projects/iAMMember:IAMMember")
    # GKE's least-privilege node role and image pulls from Artifact Registry, as Google's guide
    # grants a node account (kubernetes-engine/security/configure-node-service-accounts,
    # consulted 2026-11-28): no project-wide read of every bucket.
    assert sorted(b["role"] for b in bindings) == [
        "roles/artifactregistry.reader",
        "roles/container.defaultNodeServiceAccount",
    ]
    assert {(b["member"], b["project"]) for b in bindings} == {
        (f"serviceAccount:{email}", "my-gpu-project")
    }
    (cluster,) = gcp_inputs(run, "gcp:container/cluster:Cluster")
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "my-gpu-project.svc.id.goog"}
    identity = {
        r.urn
        for r in run.resources
        if r.type in ("gcp:serviceaccount/account:Account", "gcp:projects/iAMMember:IAMMember")
    }
    assert len(identity) == 3
    for pool in run.of_type(NODE_POOL):
        assert pool.inputs["nodeConfig"]["serviceAccount"] == email, pool.name
        assert pool.inputs["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        # No node boots before its account may write logs and pull images.
        assert identity <= set(pool.options["dependsOn"]), pool.name


def test_node_account_ids_fit_gcp_for_every_cluster_name() -> None:
    assert node_account_id("gpu-cluster") == "gpu-cluster-nodes"
    assert node_account_id("a" * 24) == "a" * 24 + "-nodes"  # 30: still plain
    long_a, long_b = "train-" + "a" * 34, "train-" + "a" * 33 + "b"  # 40, GKE's longest
    ids = {node_account_id(n) for n in (long_a, long_b, "a" * 25, "x-" * 12 + "y")}
    assert len(ids) == 4
    for account_id in ids:
        assert 6 <= len(account_id) <= 30 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])", account_id)
    assert node_account_id("a") == "a-nodes"


def test_the_upgrade_replaces_both_pools_once_and_updates_the_cluster_in_place() -> None:
    """A cluster deployed before the nodes had their own account: the pools' service account is
    force-new (docs/operations.md); Workload Identity and GKE_METADATA are updated in place."""
    now = rows(run_stack("a3-high"))
    before = without(
        without(now, "gpu-cluster-system", "serviceAccount", "workloadMetadataConfig"),
        "gpu-cluster-a3high",
        "serviceAccount",
        "workloadMetadataConfig",
    )
    cluster = next(k for k in before if k[0] == "gcp:container/cluster:Cluster")
    before[cluster] = {**before[cluster], "inputs": dict(before[cluster]["inputs"])}
    del before[cluster]["inputs"]["workloadIdentityConfig"]
    steps = {(s.name, s.op, s.fields) for s in plan(before, now)}
    assert ("gpu-cluster-system", "replace", ("nodeConfig.serviceAccount",)) in steps
    assert ("gpu-cluster-a3high", "replace", ("nodeConfig.serviceAccount",)) in steps
    assert ("gpu-cluster-cluster", "update", ()) in steps


def test_google_groups_for_rbac_turns_on_in_place() -> None:
    """gcp.rbacSecurityGroup sets GKE's security group on the cluster; on a deployed stack the
    edit updates the cluster alone (the field is not force-new in the pinned provider:
    test_gcp_force_new holds the replacement table to its source)."""
    group = "gke-security-groups@example.com"
    plain = run_stack("gcp-a4")
    grouped = run_stack("gcp-a4", f"gcp.rbacSecurityGroup={group}")
    (cluster,) = gcp_inputs(grouped, "gcp:container/cluster:Cluster")
    assert cluster["authenticatorGroupsConfig"] == {"securityGroup": group}
    (before,) = gcp_inputs(plain, "gcp:container/cluster:Cluster")
    assert "authenticatorGroupsConfig" not in before
    steps = {(s.name, s.op, s.fields) for s in plan(rows(plain), rows(grouped))}
    assert steps == {("gpu-cluster-cluster", "update", ())}


def test_a3_mega_pool() -> None:
    pool = gpu_pool(run_stack("gcp-a3"))
    assert pool["nodeCount"] == 2
    config = pool["nodeConfig"]
    assert config["machineType"] == "a3-megagpu-8g"
    (accelerator,) = config["guestAccelerators"]
    assert accelerator["type"] == "nvidia-h100-mega-80gb" and accelerator["count"] == 8
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    assert config["gvnic"] == {"enabled": True}
    assert config["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    ]
    assert pool["placementPolicy"] == {"type": "COMPACT"}
    assert len(pool["networkConfig"]["additionalNodeNetworkConfigs"]) == 8


@pytest.mark.parametrize(
    ("stack", "overrides", "machine", "ssds"),
    [
        ("a3-high", (), "a3-highgpu-8g", 16),
        ("gcp-a3", (), "a3-megagpu-8g", 16),
        ("gcp-a4", ("gcp.machineType=a3-ultragpu-8g",), "a3-ultragpu-8g", 32),
        ("gcp-a4", (), "a4-highgpu-8g", 32),
    ],
)
def test_gpu_nodes_keep_their_ephemeral_storage_on_the_machines_local_ssds(
    stack: str, overrides: tuple[str, ...], machine: str, ssds: int
) -> None:
    run = run_stack(stack, *overrides)
    config = gpu_pool(run)["nodeConfig"]
    assert config["machineType"] == machine
    assert config["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": ssds}
    # The CPU system pool has no bundled local SSD: its ephemeral storage is its boot disk.
    assert "ephemeralStorageLocalSsdConfig" not in pools(run)["system"]["nodeConfig"]


NODE_POOL = "gcp:container/nodePool:NodePool"


def without(now: dict[Any, Any], pool: str, *fields: str) -> dict[Any, Any]:
    """`now` as an earlier version rendered it: `pool` without these nodeConfig fields."""
    before = {key: dict(row) for key, row in now.items()}
    key = (NODE_POOL, pool)
    before[key]["inputs"] = dict(before[key]["inputs"])
    config = before[key]["inputs"]["nodeConfig"]
    before[key]["inputs"]["nodeConfig"] = {k: v for k, v in config.items() if k not in fields}
    return before


def test_a_pool_created_without_local_ssds_is_replaced_once_by_the_upgrade() -> None:
    """The field is force-new: a pool deployed by an earlier version of the program (no local
    SSD setting) is replaced by the first `pulumi up` of this one (docs/operations.md)."""
    now = rows(run_stack("gcp-a3"))
    before = without(now, "gpu-cluster-a3mega", "ephemeralStorageLocalSsdConfig")
    (step,) = [s for s in plan(before, now) if s.op != "update"]
    assert step == Step(
        NODE_POOL, "gpu-cluster-a3mega", "replace", ("nodeConfig.ephemeralStorageLocalSsdConfig",)
    )


def test_reservation_consumes_it_and_adds_no_placement_policy() -> None:
    run = run_stack(
        "gcp-a3",
        "gcp.provisioning=reservation",
        "gcp.reservation=a3-res",
        "gcp.maintenanceInterval=PERIODIC",
    )
    pool = gpu_pool(run)
    assert "placementPolicy" not in pool
    assert pool["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/my-gpu-project/reservations/a3-res"],
    }
    assert pool["nodeConfig"]["hostMaintenancePolicy"] == {"maintenanceInterval": "PERIODIC"}
    assert not run.of_type("gcp:compute/resourcePolicy:ResourcePolicy")


def test_named_compact_policy_when_a_max_distance_is_asked() -> None:
    run = run_stack("gcp-a3", "gcp.placementMaxDistance=2")
    (policy,) = gcp_inputs(run, "gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "maxDistance": 2}
    pool = gpu_pool(run)
    assert pool["placementPolicy"] == {"type": "COMPACT", "policyName": policy["name"]}


def test_spot_pool() -> None:
    pool = gpu_pool(run_stack("gcp-a3", "gcp.provisioning=spot"))
    assert pool["nodeConfig"]["spot"] is True
    assert pool["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}


AR_IMAGE = "image=us-central1-docker.pkg.dev/my-project/training/pytorch:25.01-py3"


@pytest.mark.parametrize("stack", ["gcp-a3", "a3-high", "gcp-a4"])
def test_image_streaming_is_off_unless_asked_and_written_either_way(stack: str) -> None:
    """gcfs_config is Optional+Computed in the provider: written as false too, so turning it
    off turns it off. Only the GPU pool streams; its node image is the one streaming runs on."""
    off = gpu_pool(run_stack(stack))["nodeConfig"]
    assert off["gcfsConfig"] == {"enabled": False}
    run = run_stack(stack, "gcp.imageStreaming=true", AR_IMAGE)
    on = gpu_pool(run)["nodeConfig"]
    assert on["gcfsConfig"] == {"enabled": True}
    # "You must use the Container-Optimized OS with containerd node image" (cloud.google.com/
    # kubernetes-engine/docs/how-to/image-streaming, "Requirements", consulted 2026-11-24).
    assert on["imageType"] == "COS_CONTAINERD"
    assert "gcfsConfig" not in pools(run)["system"]["nodeConfig"]
    assert other_warnings(run.warnings) == []


def test_streaming_an_image_outside_artifact_registry_warns_and_is_not_refused() -> None:
    message = (
        "gpu-cluster:gcp.imageStreaming is true but gpu-cluster:image = "
        "'nvcr.io/nvidia/pytorch:26.04-py3' is not in Artifact Registry "
        "(<location>-docker.pkg.dev/...): GKE streams only images there and pulls this one "
        "whole, as without streaming; push it to Artifact Registry or set gcp.imageStreaming "
        "to false"
    )
    config = engine_config("gcp-a3", ("gcp.imageStreaming=true",))
    assert other_warnings(settings_from(*config, PROVIDER_SETTINGS, as_of=AS_OF)[1]) == [message]
    run = run_stack("gcp-a3", "gcp.imageStreaming=true")
    assert message in run.warnings
    assert gpu_pool(run)["nodeConfig"]["gcfsConfig"] == {"enabled": True}
    # Multi-region and regional Artifact Registry hosts are streamed; look-alikes are not.
    for image, warns in (
        ("us-docker.pkg.dev/p/r/train:1", False),
        ("europe-west4-docker.pkg.dev/p/r/train:1", False),
        ("docker.pkg.dev/p/r/train:1", True),
        ("gcr.io/p/train:1", True),
        ("registry.example.com/us-docker.pkg.dev/train:1", True),
    ):
        edited = engine_config("gcp-a3", ("gcp.imageStreaming=true", f"image={image}"))
        warnings = settings_from(*edited, PROVIDER_SETTINGS, as_of=AS_OF)[1]
        assert bool(other_warnings(warnings)) is warns, image
    # Off, nothing to say about the image.
    warnings = settings_from(*engine_config("gcp-a3"), PROVIDER_SETTINGS, as_of=AS_OF)[1]
    assert other_warnings(warnings) == []


DISK_IMAGE = "projects/my-gpu-project/global/images/pytorch-25-01"


@pytest.mark.parametrize("stack", ["gcp-a3", "a3-high", "gcp-a4"])
def test_a_preloaded_image_disk_is_the_gpu_pool_s_secondary_boot_disk(stack: str) -> None:
    run = run_stack(
        stack, "gcp.imageStreaming=true", AR_IMAGE, f"gcp.secondaryBootDiskImage={DISK_IMAGE}"
    )
    node_config = gpu_pool(run)["nodeConfig"]
    assert node_config["secondaryBootDisks"] == [
        {"diskImage": DISK_IMAGE, "mode": "CONTAINER_IMAGE_CACHE"}
    ]
    assert node_config["gcfsConfig"] == {"enabled": True}
    assert "secondaryBootDisks" not in pools(run)["system"]["nodeConfig"]
    assert "secondaryBootDisks" not in gpu_pool(run_stack(stack))["nodeConfig"]


def test_a_preloaded_image_disk_without_image_streaming_is_refused_naming_both() -> None:
    config = engine_config("gcp-a3", (f"gcp.secondaryBootDiskImage={DISK_IMAGE}",))
    with pytest.raises(ConfigError) as err:
        settings_from(*config, PROVIDER_SETTINGS, as_of=AS_OF)
    assert (
        "gpu-cluster:gcp.secondaryBootDiskImage is only used when gcp.imageStreaming is true"
        in str(err.value)
    )


def test_turning_image_streaming_on_or_off_updates_the_pool_in_place() -> None:
    """gcfs_config is not ForceNew (hashicorp/terraform-provider-google node_config.go): no new
    pool either way, nor for a pool rendered before the key existed (no gcfsConfig)."""
    off = rows(run_stack("gcp-a3", AR_IMAGE))
    on = rows(run_stack("gcp-a3", "gcp.imageStreaming=true", AR_IMAGE))
    older = without(off, "gpu-cluster-a3mega", "gcfsConfig")
    for before, after in ((off, on), (on, off), (older, off), (older, on)):
        steps = [s for s in plan(before, after) if s.type == NODE_POOL]
        assert steps == [Step(NODE_POOL, "gpu-cluster-a3mega", "update")]


def test_networks_mtu_ranges_firewalls_and_nat() -> None:
    run = run_stack("gcp-a3")
    vpcs = {n["name"]: n for n in gcp_inputs(run, "gcp:compute/network:Network")}
    assert sorted(vpcs) == [f"gpu-cluster-gpu{i}" for i in range(1, 9)] + ["gpu-cluster-host"]
    # Host VPC too, as Google's A3 blueprints set it (cluster-toolkit gke-a3-megagpu.yaml).
    assert {name: vpc["mtu"] for name, vpc in vpcs.items()} == dict.fromkeys(vpcs, 8244)
    subnets = gcp_inputs(run, "gcp:compute/subnetwork:Subnetwork")
    ranges = [s["ipCidrRange"] for s in subnets]
    ranges += [r["ipCidrRange"] for s in subnets for r in s.get("secondaryIpRanges", [])]
    import ipaddress

    nets = [ipaddress.IPv4Network(r) for r in ranges]
    assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
    firewalls = gcp_inputs(run, "gcp:compute/firewall:Firewall")
    assert len(firewalls) == 9
    assert all({a["protocol"] for a in f["allows"]} == {"tcp", "udp", "icmp"} for f in firewalls)
    assert len(run.of_type("gcp:compute/routerNat:RouterNat")) == 1


def test_kubernetes_objects_use_the_cluster_provider() -> None:
    run = run_stack("gcp-a3")
    k8s_resources = [
        r
        for r in run.resources
        if r.custom and r.type.startswith("kubernetes:") and not r.type.startswith("pulumi:")
    ]
    assert k8s_resources
    assert {r.options["provider"] for r in k8s_resources} == {"gpu-cluster-k8s-id"}
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    kubeconfig = json.loads(provider.inputs["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://203.0.113.10"
    assert kubeconfig["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"


@pytest.mark.parametrize(
    ("stack", "mode", "nics"), [("gcp-a3", "tcpxo", 8), ("a3-high", "tcpx", 4)]
)
def test_every_gpu_nic_is_wired_end_to_end(stack: str, mode: str, nics: int) -> None:
    """VPC -> node network -> Network object -> pod interface -> NCCL interface list."""
    run = run_stack(stack)
    vpcs = {n["name"] for n in gcp_inputs(run, "gcp:compute/network:Network")}
    pool = gpu_pool(run)
    node_networks = [c["network"] for c in pool["networkConfig"]["additionalNodeNetworkConfigs"]]
    assert len(node_networks) == nics and set(node_networks) <= vpcs
    params = {p["metadata"]["name"]: p["spec"] for p in manifests(run, "GKENetworkParamSet")}
    networks = {n["metadata"]["name"]: n["spec"] for n in manifests(run, "Network")}
    annotations = one(run, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert len(interfaces) == nics + 1
    for i, iface in enumerate(interfaces[1:], start=1):
        network = networks[iface["network"]]
        param = params[network["parametersRef"]["name"]]
        assert param["vpc"] == node_networks[i - 1]
        assert param["deviceMode"] == "NetDevice"
        assert iface["interfaceName"] == f"eth{i}"
    # TCPX's list is in the pod; TCPXO's profile finds the GPU NICs itself at launch, falling back
    # to eth1..eth8 (google/nccl-plugin-gpudirect-tcpxo tcpxo_scripts/nccl-env-profile.sh line 17,
    # 04815d1), the names the pod gives them.
    nccl_ifaces = (
        "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"
        if mode == "tcpxo"
        else env_of(container(run))["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"]
    )
    assert nccl_ifaces.split(",") == [iface["interfaceName"] for iface in interfaces[1:]]


# Google's GPUDirect-TCPX(O) images. TCPX: GoogleCloudPlatform/container-engine-accelerators
# ("CEA") gpudirect-tcpx/README.md at 98c85a6 (2026-06-22), releases "Feb 15, 2024" (plugin
# v3.1.9, RxDM v2.0.12) and "Jun 22, 2026" (v3.1.12, v2.0.15).
TCPX_REGISTRY = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx"
TCPX_V3_1_9_INSTALLER = f"{TCPX_REGISTRY}/nccl-plugin-gpudirecttcpx-dev:v3.1.9"
TCPX_V3_1_9_RXDM = f"{TCPX_REGISTRY}/tcpgpudmarxd-dev:v2.0.12"
TCPX_V3_1_12_INSTALLER = f"{TCPX_REGISTRY}/nccl-plugin-gpudirecttcpx-dev:v3.1.12"
TCPX_V3_1_12_RXDM = f"{TCPX_REGISTRY}/tcpgpudmarxd-dev:v2.0.15"
# TCPXO release v1.0.17: google/nccl-plugin-gpudirect-tcpxo 04815d1 (2026-06-26, "GPUDirect-TCPXO
# v1.0.17"; RxDM 1.0.23 in buffer_mgmt_daemon/buffer_manager_version.h), in the registry of CEA
# gpudirect-tcpxo/nccl-test-latest.yaml and nccl-tcpxo-installer.yaml (992db81).
TCPXO_REGISTRY = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo"
TCPXO_V1_0_17_INSTALLER = f"{TCPXO_REGISTRY}/nccl-plugin-gpudirecttcpx-dev:v1.0.17"
TCPXO_V1_0_17_RXDM = f"{TCPXO_REGISTRY}/tcpgpudmarxd-dev:v1.0.23"


@pytest.mark.parametrize(
    ("stack", "mode", "rxdm_image", "installer_image", "rxdm_capabilities", "accelerator"),
    [
        # The newest TCPXO release (GKE 1.28 and newer); capabilities: CEA gpudirect-tcpxo/
        # nccl-test-latest.yaml, accelerator: gpudirect-tcpxo/nccl-tcpxo-installer.yaml (992db81).
        (
            "gcp-a3",
            "tcpxo",
            TCPXO_V1_0_17_RXDM,
            TCPXO_V1_0_17_INSTALLER,
            ["NET_ADMIN", "NET_BIND_SERVICE"],
            "nvidia-h100-mega-80gb",
        ),
        # TCPX on GKE 1.34+ (CEA 21ed661, e3ae253: RxDM v2.0.15 "used in GKE 1.34"); capabilities:
        # CEA gpudirect-tcpx/nccl-test-latest.yaml, accelerator: nccl-tcpx-installer.yaml (992db81).
        (
            "a3-high",
            "tcpx",
            TCPX_V3_1_12_RXDM,
            TCPX_V3_1_12_INSTALLER,
            ["NET_ADMIN"],
            "nvidia-h100-80gb",
        ),
    ],
    ids=["gcp-a3", "a3-high"],
)
def test_gpudirect_sidecar_and_daemons_run_googles_release_for_the_stacks_gke_minor(
    stack: str,
    mode: str,
    rxdm_image: str,
    installer_image: str,
    rxdm_capabilities: list[str],
    accelerator: str,
) -> None:
    """The shipped stacks (GKE 1.35) run the release Google publishes for it. Its NCCL settings
    are held against Google's, one by one, in tests/vendor/gke_gpudirect.yaml
    (tests/test_vendor_gke.py)."""
    run = run_stack(stack)
    spec = pod_spec(run)
    (sidecar,) = spec["initContainers"]
    assert sidecar["name"] == f"{mode}-daemon" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == rxdm_image
    assert sidecar["securityContext"]["capabilities"]["add"] == rxdm_capabilities
    assert sidecar["securityContext"]["privileged"] is False
    # Added capabilities are only effective for root; the training container stays non-root.
    assert (
        sidecar["securityContext"]["runAsUser"],
        sidecar["securityContext"]["runAsNonRoot"],
    ) == (0, False)
    assert "runAsUser" not in container(run)["securityContext"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert "hostNetwork" not in spec
    env = env_of(container(run))
    # TCPX's pod names the plugin's directory as its library path (CEA gpudirect-tcpx/
    # nccl-test-latest.yaml); TCPXO's keeps the image's, to which the release's profile, sourced
    # by the launchers, prepends it (nccl-plugin-gpudirect-tcpxo nccl-env-profile.sh, 04815d1).
    assert env.get("LD_LIBRARY_PATH") == (None if mode == "tcpxo" else "/usr/local/nvidia/lib64")
    assert env.get("NCCL_INIT_SCRIPT") == (
        "/usr/local/nvidia/lib64/nccl-env-profile.sh" if mode == "tcpxo" else None
    )
    # The GPUs are the profile's to list (it exports CUDA_VISIBLE_DEVICES), not the pod's.
    assert "CUDA_VISIBLE_DEVICES" not in env
    annotations = one(run, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    devices = annotations[f"devices.gke.io/container.{mode}-daemon"]
    assert "- path: /dev/nvidia7\n" in devices
    daemons = {d["metadata"]["name"]: d for d in manifests(run, "DaemonSet")}
    installer = daemons[f"nccl-{mode}-installer"]
    assert installer["metadata"]["namespace"] == "kube-system"
    images = [c["image"] for c in installer["spec"]["template"]["spec"]["initContainers"]]
    assert installer_image in images
    affinity = installer["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    expr = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]
    assert expr == {
        "key": "cloud.google.com/gke-accelerator",
        "operator": "In",
        "values": [accelerator],
    }
    assert "device-injector" in daemons


def test_training_pods_run_on_the_a3_pool_as_non_root() -> None:
    spec = pod_spec(run_stack("gcp-a3"))
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["a3mega"]}
    ]
    assert spec["securityContext"]["runAsUser"] == 10001
    training = container(run_stack("gcp-a3"))
    assert "add" not in training["securityContext"]["capabilities"]  # TCPXO workload needs none


def test_stack_outputs_tell_the_user_what_to_run_next() -> None:
    outputs = run_stack("gcp-a3").outputs
    assert outputs["getCredentialsCommand"] == (
        "gcloud container clusters get-credentials gpu-cluster"
        " --zone us-central1-a --project my-gpu-project"
    )
    assert outputs["nodePoolName"] == "a3mega"
    assert outputs["clusterEndpoint"] == "203.0.113.10"
    # Every command names the context get-credentials writes, not whichever one is current.
    assert outputs["launchCommand"] == (
        "python3 -m gpu_cluster.launch_all"
        " kubectl --context gke_my-gpu-project_us-central1-a_gpu-cluster"
        " training gpu-cluster 2 /opt/gpu-cluster/launch-torchrun.sh /workspace/train.py"
    )


# --- system pool, versions, upgrades (issue #12) ---------------------------------------------


def test_system_pool_is_untainted_cpu_capacity_sized_from_config() -> None:
    run = run_stack("gcp-a3")
    system = pools(run)["system"]
    assert system["nodeConfig"]["machineType"] == "e2-standard-4"  # cluster-toolkit default
    assert "taints" not in system["nodeConfig"]
    assert "guestAccelerators" not in system["nodeConfig"]
    assert system["autoscaling"] == {"totalMinNodeCount": 2, "totalMaxNodeCount": 10}
    assert system["nodeConfig"]["diskSizeGb"] == 100
    assert system["cluster"] == gcp_inputs(run, "gcp:container/cluster:Cluster")[0]["name"]
    sized = pools(
        run_stack(
            "a3-high", "gcp.systemPool.machineType=e2-standard-8", "gcp.systemPool.minNodes=3"
        )
    )["system"]
    assert sized["nodeConfig"]["machineType"] == "e2-standard-8"
    assert sized["autoscaling"]["totalMinNodeCount"] == 3


@pytest.mark.parametrize(
    ("stack", "overrides", "machine", "disk"),
    [
        ("a3-high", (), "e2-standard-4", 100),
        ("gcp-a3", (), "e2-standard-4", 100),
        ("gcp-a4", ("gcp.machineType=a3-ultragpu-8g",), "e2-standard-16", 200),
        ("gcp-a4", (), "e2-standard-16", 200),
        # What the stack sets wins over the machine's default, key by key.
        ("gcp-a4", ("gcp.systemPool.machineType=e2-standard-8",), "e2-standard-8", 200),
        ("gcp-a4", ("gcp.systemPool.diskSizeGb=150",), "e2-standard-16", 150),
    ],
)
def test_system_pool_is_sized_for_the_gpu_machine_as_cluster_toolkit_sizes_it(
    stack: str, overrides: tuple[str, ...], machine: str, disk: int
) -> None:
    system = pools(run_stack(stack, *overrides))["system"]["nodeConfig"]
    assert (system["machineType"], system["diskSizeGb"]) == (machine, disk)


def test_kubernetes_provider_waits_for_the_system_pool_not_the_gpu_pool() -> None:
    """The cluster's own objects are created while the GPU pool comes up
    (tests/test_dependency_graph.py follows every other path to it)."""
    run = run_stack("gcp-a3")
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    pool_urns = {r.inputs["name"]: r.urn for r in run.of_type("gcp:container/nodePool:NodePool")}
    assert pool_urns["system"] in provider.options["dependsOn"]
    assert pool_urns["a3mega"] not in provider.options["dependsOn"]


def timeouts(run: ProgramRun, type_: str, name: str) -> dict[str, str]:
    (row,) = [r for r in run.of_type(type_) if r.name == name]
    found: dict[str, str] = row.options["customTimeouts"]
    return found


@pytest.mark.parametrize(("nodes", "update"), [(2, "120m"), (24, "120m"), (64, "320m")])
def test_gpu_pool_timeouts_fit_a_slow_create_and_a_node_by_node_update(
    nodes: int, update: str
) -> None:
    """Two hours to create (a GPU pool has taken ~35 min, past a 30 min timeout), five minutes
    per node for a rolling update, with the create figure as its floor."""
    run = run_stack("gcp-a3", f"nodes={nodes}")
    assert timeouts(run, "gcp:container/nodePool:NodePool", "gpu-cluster-a3mega") == {
        "create": "120m",
        "update": update,
        "delete": "60m",
    }


@pytest.mark.parametrize("stack", ["gcp-a3", "barcelona"])
def test_the_workload_waits_long_enough_for_a_large_image_on_new_nodes(stack: str) -> None:
    run = run_stack(stack)
    assert timeouts(run, "kubernetes:apps/v1:StatefulSet", "gpu-cluster-workload") == {
        "create": "30m",
        "update": "30m",
        "delete": "",  # the provider's default: deleting pods pulls no image
    }


@pytest.mark.parametrize("stack", ["gcp-a3", "a3-high", "gcp-a4"])
def test_gpu_pool_upgrades_without_a_spare_a3_machine(stack: str) -> None:
    for pool in pools(run_stack(stack)).values():
        assert pool["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}


@pytest.mark.parametrize("stack", ["gcp-a3", "a3-high", "gcp-a4"])
def test_cluster_is_held_on_its_minor_until_end_of_support(stack: str) -> None:
    (cluster,) = gcp_inputs(run_stack(stack), "gcp:container/cluster:Cluster")
    (exclusion,) = cluster["maintenancePolicy"]["maintenanceExclusions"]
    assert exclusion["exclusionOptions"] == {
        "scope": "NO_MINOR_OR_NODE_UPGRADES",
        "endTimeBehavior": "UNTIL_END_OF_SUPPORT",
    }
    assert "endTime" not in exclusion  # exactly one of endTime / endTimeBehavior
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}
    free = gcp_inputs(
        run_stack(stack, "gcp.holdMinorUpgrades=false"), "gcp:container/cluster:Cluster"
    )[0]
    assert "maintenancePolicy" not in free


# End of standard support of the GKE minors around the tests' date: endoflife-date/endoflife.date
# products/google-kubernetes-engine.md `eol` at ca0c141 (2026-08-21), Google's release schedule.
END_OF_STANDARD_SUPPORT = {34: date(2026, 10, 1), 35: date(2027, 4, 11), 36: date(2027, 8, 9)}
# The render warns from 60 days before that end (docs/operations.md, "Dates and `--as-of`").
SUPPORT_NOTICE_DAYS = 60


@pytest.mark.parametrize("stack", ["gcp-a3", "a3-high", "gcp-a4"])
def test_shipped_stacks_pin_a_gke_minor_in_standard_support_on_the_tests_date(stack: str) -> None:
    """As of the tests' date (not the clock's, which would turn CI red on the day a window
    ends): in support and not within the notice period; after it the render warns."""
    settings, warnings = settings_from(*engine_config(stack), PROVIDER_SETTINGS, as_of=AS_OF)
    assert other_warnings(warnings) == []
    assert settings.gcp is not None
    minor = gke_minor(settings.gcp.min_master_version)
    assert (END_OF_STANDARD_SUPPORT[minor] - AS_OF.day).days > SUPPORT_NOTICE_DAYS
    assert settings.kubernetes_version == f"1.{minor}"


def test_tcpxo_sidecar_runs_as_google_runs_it_with_the_startup_probe() -> None:
    sidecar = container(run_stack("gcp-a3"), "tcpxo-daemon")
    assert sidecar["command"] == ["/bin/sh", "-c"]
    (script,) = sidecar["args"]
    assert script.splitlines() == [
        "set -ex",
        "chmod 755 /fts/entrypoint_rxdm_container.sh",
        "/fts/entrypoint_rxdm_container.sh --num_hops=2",
    ]
    for retired in ("--num_nics", "--uid", "--alsologtostderr"):
        assert retired not in script
    assert env_of(sidecar)["HEALTH_CHECK_LOG_FILE"] == "/run/health-check"
    assert "_" not in env_of(sidecar)["HEALTH_CHECK_LOG_FILE"]  # RxDM rejects '_' in the name
    assert sidecar["startupProbe"] == {
        "exec": {"command": ["cat", "/run/health-check"]},
        "initialDelaySeconds": 1,
        "periodSeconds": 5,
        "timeoutSeconds": 1,
        "failureThreshold": 6,
    }
    # Google's capabilities on top of the runtime default: nothing dropped.
    assert sidecar["securityContext"]["capabilities"] == {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}
    assert container(run_stack("gcp-a3"))["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_tcpxo_pod_names_the_profile_its_directory_and_the_stacks_debug_level() -> None:
    """The profile sets the rest, NCCL_DEBUG=WARN among them; the launchers set the pod's
    NCCL_DEBUG again after it, so the stack's nccl.debug holds (tests/test_nccl_init_script.py)."""
    env = env_of(container(run_stack("gcp-a3")))
    nccl = {k: v for k, v in env.items() if k.startswith("NCCL_") and k != "NCCL_ENV_FILE"}
    assert nccl == {
        "NCCL_DEBUG": "WARN",
        # CEA gpudirect-tcpxo/README.md "NCCL configs" (992db81).
        "NCCL_LIB_DIR": "/usr/local/nvidia/lib64",
        "NCCL_INIT_SCRIPT": "/usr/local/nvidia/lib64/nccl-env-profile.sh",
        # CEA gpudirect-tcpxo/nccl-test-latest.yaml (992db81).
        "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices",
    }
    # Whatever the release, the pod sets NCCL_DEBUG once, to the stack's level.
    for stack in ("a3-high", "gcp-a3", "gcp-a4"):
        env = container(run_stack(stack, "nccl.debug=INFO"))["env"]
        assert [e["value"] for e in env if e["name"] == "NCCL_DEBUG"] == ["INFO"], stack


def test_tcpx_release_follows_the_gke_minor() -> None:
    # The 1.34 boundary: CEA commits 21ed661 and e3ae253 (RxDM v2.0.15 "used in GKE 1.34").
    assert releases_for("tcpx", 33) == ["tcpx-v3.1.9"]
    assert releases_for("tcpx", 34) == releases_for("tcpx", 35) == ["tcpx-v3.1.12"]
    # a3-high on GKE 1.33 while it was supported, and as shipped (1.35).
    old = run_program(*engine_config("a3-high", ON_1_33), "a3-high", as_of=BEFORE_1_34)
    new = run_stack("a3-high")
    for run, installer, rxdm in (
        (old, TCPX_V3_1_9_INSTALLER, TCPX_V3_1_9_RXDM),
        (new, TCPX_V3_1_12_INSTALLER, TCPX_V3_1_12_RXDM),
    ):
        assert container(run, "tcpx-daemon")["image"] == rxdm
        daemons = {d["metadata"]["name"]: d for d in manifests(run, "DaemonSet")}
        init = daemons["nccl-tcpx-installer"]["spec"]["template"]["spec"]["initContainers"]
        assert installer in [c["image"] for c in init]
    old_env, new_env = env_of(container(old)), env_of(container(new))
    # GKE >= 1.34 (COS 125 devmem TCP) drops the old daemon's tuning and the fixed channels:
    # CEA gpudirect-tcpx/nccl-config.yaml sets them at 09a75de, not at 0e5609b (21ed661's message).
    dropped = {
        "NCCL_GPUDIRECTTCPX_FORCE_ACK",
        "NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP",
        "NCCL_MAX_NCHANNELS",
        "NCCL_MIN_NCHANNELS",
    }
    assert dropped <= old_env.keys() and not dropped & new_env.keys()
    # CEA gpudirect-tcpx/README.md (98c85a6): NCCL_ALGO=Ring on "Feb 15, 2024", Ring,Tree since.
    assert (old_env["NCCL_ALGO"], new_env["NCCL_ALGO"]) == ("Ring", "Ring,Tree")


def settings_of(stack: str, *overrides: str) -> Settings:
    config, _ = engine_config(stack, overrides)
    raw = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("gpu-cluster:")}
    return load_settings(decode_config(raw))


def gke_errors(stack: str, as_of: date, *overrides: str) -> str:
    """What the stack with `overrides` is refused for, checked as of `as_of` (as --as-of)."""
    try:
        settings_from(
            *engine_config(stack, overrides), PROVIDER_SETTINGS, as_of=AsOf(as_of, pinned=True)
        )
    except ConfigError as exc:
        return str(exc)
    return ""


ON_1_34 = ("gcp.minMasterVersion=1.34", "kubernetesVersion=1.34")
ON_1_33 = ("gcp.minMasterVersion=1.33", "kubernetesVersion=1.33")
# A day GKE 1.33 was in standard support, before the shipped 1.35.
BEFORE_1_34 = AsOf(date(2026, 7, 1), pinned=True)


def test_a_minor_past_end_of_standard_support_is_refused_as_of_the_date() -> None:
    errors = gke_errors("gcp-a3", AS_OF.day, *ON_1_34)
    assert (
        "gpu-cluster:gcp.minMasterVersion = '1.34': GKE 1.34 left standard support on 2026-10-01 "
        "(as of 2026-11-23); use 1.35 or 1.36"
    ) in errors
    assert gke_errors("gcp-a3", date(2026, 9, 1), *ON_1_34) == ""
    # A minor the support table does not know is refused too, whatever the date.
    errors = gke_errors(
        "gcp-a3", date(2026, 9, 1), "gcp.minMasterVersion=1.40", "kubernetesVersion=1.40"
    )
    assert "GKE 1.40 is not in this program's support table" in errors
    # The shipped pin fails loudly once 1.35 leaves support.
    assert "left standard support on 2027-04-11 (as of 2027-04-12)" in gke_errors(
        "gcp-a3", date(2027, 4, 12)
    )


def test_a_minor_near_its_end_of_support_is_a_warning_with_the_days_left() -> None:
    as_of = AsOf(date(2027, 2, 10), pinned=True)
    _, warnings = settings_from(*engine_config("gcp-a3"), PROVIDER_SETTINGS, as_of=as_of)
    assert other_warnings(warnings) == [
        "gpu-cluster:gcp.minMasterVersion = '1.35': GKE 1.35 leaves standard support on "
        "2027-04-11, 60 days after 2027-02-10; GKE then upgrades the cluster whatever the hold; "
        "use 1.36 (docs/operations.md: moving a stack to the next GKE release)"
    ]
    a_day_earlier = AsOf(date(2027, 2, 9), pinned=True)
    earlier = settings_from(*engine_config("gcp-a3"), PROVIDER_SETTINGS, as_of=a_day_earlier)[1]
    assert other_warnings(earlier) == []


def test_schema_refuses_a_tcpx_release_google_does_not_publish_for_the_gke_minor() -> None:
    errors = gke_errors("a3-high", AS_OF.day, "gcp.gpudirectRelease=tcpx-v3.1.9")
    assert "'tcpx-v3.1.9' is published for GKE 1.28-1.33" in errors
    assert "use 'tcpx-v3.1.12'" in errors
    # Before 1.34 the old set is the default (and the new one refused).
    before = BEFORE_1_34.day
    assert gke_errors("a3-high", before, *ON_1_33) == ""
    before_1_34 = gpudirect_release(settings_of("a3-high", *ON_1_33))
    assert (before_1_34.installer_image, before_1_34.rxdm_image) == (
        TCPX_V3_1_9_INSTALLER,
        TCPX_V3_1_9_RXDM,
    )
    errors = gke_errors("a3-high", before, *ON_1_33, "gcp.gpudirectRelease=tcpx-v3.1.12")
    assert "published for GKE 1.34 or newer" in errors


def test_schema_ties_kubernetes_version_and_the_hold_to_the_cluster() -> None:
    errors = gke_errors("gcp-a3", AS_OF.day, "kubernetesVersion=1.36")
    assert "gpu-cluster:kubernetesVersion = '1.36' must be '1.35'" in errors
    errors = gke_errors("gcp-a3", AS_OF.day, "gcp.releaseChannel=UNSPECIFIED")
    assert "holdMinorUpgrades needs a release channel" in errors
    unheld = ("gcp.releaseChannel=UNSPECIFIED", "gcp.holdMinorUpgrades=false")
    assert gke_errors("gcp-a3", AS_OF.day, *unheld) == ""
    # An exact patch below TCPXO's published floor for its minor is refused.
    errors = gke_errors(
        "gcp-a3",
        date(2026, 3, 1),
        "gcp.minMasterVersion=1.32.2-gke.1",
        "kubernetesVersion=1.32",
    )
    assert "use 1.32.11-gke.1174000 or newer" in errors


def test_schema_refuses_an_empty_system_pool_range() -> None:
    errors = gke_errors(
        "gcp-a3", AS_OF.day, "gcp.systemPool.minNodes=5", "gcp.systemPool.maxNodes=3"
    )
    assert "gpu-cluster:gcp.systemPool: minNodes (5) must be <= maxNodes (3)" in errors


def test_placeholders_and_an_open_endpoint_are_warned_by_key() -> None:
    """The shipped GKE files' project and authorized network are placeholders `pulumi up` cannot
    use (README, "Stacks"): each is named with what to do; a real project and range draw
    nothing, and 0.0.0.0/0 is named as the open endpoint it is."""
    shipped = run_stack("gcp-a3").warnings
    assert shipped == [
        "gpu-cluster:gcp.project = 'my-gpu-project' is the shipped files' placeholder: set your "
        "project before pulumi up (pulumi config set --path gcp.project YOUR_PROJECT_ID)",
        "gpu-cluster:gcp.authorizedNetworks[0].cidrBlock = '203.0.113.0/24' is a documentation "
        "range (RFC 5737) no client is in: pulumi up could not reach the cluster it creates; "
        "list the addresses pulumi up, CI and kubectl run from",
    ]
    own = ("gcp.project=team-gpu-project", "gcp.authorizedNetworks[0].cidrBlock=34.120.0.0/16")
    assert run_stack("gcp-a3", *own).warnings == []
    # Inside another documentation range (RFC 5737 TEST-NET-1), a host's /32.
    inside = run_stack("gcp-a3", own[0], "gcp.authorizedNetworks[0].cidrBlock=192.0.2.7/32")
    assert [w.split(" is ")[0] for w in inside.warnings] == [
        "gpu-cluster:gcp.authorizedNetworks[0].cidrBlock = '192.0.2.7/32'"
    ]
    opened = run_stack("gcp-a3", own[0], "gcp.authorizedNetworks[0].cidrBlock=0.0.0.0/0")
    assert opened.warnings == [
        "gpu-cluster:gcp.authorizedNetworks[0].cidrBlock = '0.0.0.0/0' lets every address reach "
        "the control plane's endpoint; list the addresses pulumi up, CI and kubectl run from"
    ]
    assert not any("placeholder" in w for w in run_stack("nerc-production").warnings)
    # A Google Groups for RBAC group in a documentation domain (RFC 2606) is no one's.
    for domain in ("example.com", "ml.example.org", "corp.test"):
        group = f"gcp.rbacSecurityGroup=gke-security-groups@{domain}"
        assert [w.split(" is ")[0] for w in run_stack("gcp-a3", *own, group).warnings] == [
            f"gpu-cluster:gcp.rbacSecurityGroup = 'gke-security-groups@{domain}'"
        ]
    owned = "gcp.rbacSecurityGroup=gke-security-groups@examples.com"
    assert run_stack("gcp-a3", *own, owned).warnings == []
