"""The GKE stacks through the real program: networks, cluster, A3 pool, GPUDirect wiring."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.gpudirect import RELEASES
from components.offline import ProgramRun
from tests.conftest import container, env_of, manifests, one, pod_spec, run_stack


def gcp_inputs(run: ProgramRun, type_: str) -> list[dict[str, Any]]:
    return [r.inputs for r in run.of_type(type_)]


def test_cluster_is_vpc_native_multi_network_dataplane_v2_without_default_pool() -> None:
    (cluster,) = gcp_inputs(run_stack("gcp-a3"), "gcp:container/cluster:Cluster")
    assert cluster["networkingMode"] == "VPC_NATIVE"
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    assert cluster["enableMultiNetworking"] is True
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["deletionProtection"] is True
    assert cluster["location"] == "us-central1-a"
    assert cluster["minMasterVersion"] == "1.32.11-gke.1174000"
    assert cluster["releaseChannel"] == {"channel": "RAPID"}


def test_a3_mega_pool() -> None:
    (pool,) = gcp_inputs(run_stack("gcp-a3"), "gcp:container/nodePool:NodePool")
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


def test_reservation_consumes_it_and_adds_no_placement_policy() -> None:
    run = run_stack(
        "gcp-a3",
        "gcp.provisioning=reservation",
        "gcp.reservation=a3-res",
        "gcp.maintenanceInterval=PERIODIC",
    )
    (pool,) = gcp_inputs(run, "gcp:container/nodePool:NodePool")
    assert "placementPolicy" not in pool
    assert pool["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["a3-res"],
    }
    assert pool["nodeConfig"]["hostMaintenancePolicy"] == {"maintenanceInterval": "PERIODIC"}
    assert not run.of_type("gcp:compute/resourcePolicy:ResourcePolicy")


def test_named_compact_policy_when_a_max_distance_is_asked() -> None:
    run = run_stack("gcp-a3", "gcp.placementMaxDistance=2")
    (policy,) = gcp_inputs(run, "gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "maxDistance": 2}
    (pool,) = gcp_inputs(run, "gcp:container/nodePool:NodePool")
    assert pool["placementPolicy"] == {"type": "COMPACT", "policyName": policy["name"]}


def test_spot_pool() -> None:
    (pool,) = gcp_inputs(
        run_stack("gcp-a3", "gcp.provisioning=spot"), "gcp:container/nodePool:NodePool"
    )
    assert pool["nodeConfig"]["spot"] is True


def test_networks_mtu_ranges_firewalls_and_nat() -> None:
    run = run_stack("gcp-a3")
    vpcs = {n["name"]: n for n in gcp_inputs(run, "gcp:compute/network:Network")}
    assert sorted(vpcs) == [f"gpu-cluster-gpu{i}" for i in range(1, 9)] + ["gpu-cluster-host"]
    assert all(vpcs[f"gpu-cluster-gpu{i}"]["mtu"] == 8244 for i in range(1, 9))
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
    (pool,) = gcp_inputs(run, "gcp:container/nodePool:NodePool")
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
    env = env_of(container(run))
    nccl_ifaces = env[
        "NCCL_FASTRAK_IFNAME" if mode == "tcpxo" else "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"
    ]
    assert nccl_ifaces.split(",") == [iface["interfaceName"] for iface in interfaces[1:]]


@pytest.mark.parametrize(("stack", "mode"), [("gcp-a3", "tcpxo"), ("a3-high", "tcpx")])
def test_gpudirect_sidecar_env_and_daemons_follow_the_pinned_release(stack: str, mode: str) -> None:
    run = run_stack(stack)
    release = next(r for r in RELEASES.values() if r.mode == mode)
    spec = pod_spec(run)
    (sidecar,) = spec["initContainers"]
    assert sidecar["name"] == f"{mode}-daemon" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == release.rxdm_image
    assert sidecar["securityContext"]["capabilities"]["add"] == list(release.rxdm_capabilities)
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
    for key, value in release.nccl_env:
        assert env[key] == value, key
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    annotations = one(run, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    devices = annotations[f"devices.gke.io/container.{mode}-daemon"]
    assert "- path: /dev/nvidia7\n" in devices
    daemons = {d["metadata"]["name"]: d for d in manifests(run, "DaemonSet")}
    installer = daemons[f"nccl-{mode}-installer"]
    assert installer["metadata"]["namespace"] == "kube-system"
    images = [c["image"] for c in installer["spec"]["template"]["spec"]["initContainers"]]
    assert release.installer_image in images
    affinity = installer["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    expr = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]
    assert expr == {
        "key": "cloud.google.com/gke-accelerator",
        "operator": "In",
        "values": [release.accelerator],
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
    assert str(outputs["launchCommand"]).endswith(
        "launch-all kubectl training gpu-cluster 2 /opt/gpu-cluster/launch-torchrun.sh "
        "/workspace/train.py"
    )
