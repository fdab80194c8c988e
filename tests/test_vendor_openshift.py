"""The OpenShift objects that mirror a vendor's published setup, compared field by field.

Vendor data (with its upstream source) lives in tests/vendor/ (the restricted-v2 SCC, verbatim)
and below (the operators' NAD templates, verbatim, each filled in the one way the program uses
it). Every difference between the render and the vendor's object is listed in a DEVIATIONS map
with its reason; an unlisted difference, or a listed one that no longer exists, fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import BARCELONA_CREATES_NADS, manifests, one, run_stack

VENDOR = Path(__file__).resolve().parent / "vendor"

# --- restricted-v2 -----------------------------------------------------------------------------

# tests/vendor/scc-restricted-v2.yaml (openshift/cluster-kube-apiserver-operator at 79795a6).
SCC_DEVIATIONS = {
    "metadata": "our own name and description; the release annotations belong to OpenShift's",
    "allowedCapabilities": "rdma.memlock root-ipc-lock adds IPC_LOCK (only effective for UID 0)",
    "runAsUser": "RunAsAny, so that the training container alone can run as UID 0 (IPC_LOCK is "
    "inert for the non-root UID MustRunAsRange assigns: no ambient capabilities)",
    "priority": "null upstream; Pulumi drops None inputs, and SCC admission orders null as 0",
    "defaultAddCapabilities": "null upstream; [] (adds nothing either) for the same reason",
}


def differing_keys(ours: dict[str, Any], theirs: dict[str, Any]) -> set[str]:
    return {k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k)}


def test_scc_is_restricted_v2_but_for_the_listed_deviations() -> None:
    restricted = yaml.safe_load((VENDOR / "scc-restricted-v2.yaml").read_text())
    scc = one(run_stack("barcelona"), "SecurityContextConstraints")
    assert differing_keys(scc, restricted) == set(SCC_DEVIATIONS)
    assert scc["allowedCapabilities"] == [*restricted["allowedCapabilities"], "IPC_LOCK"]
    assert (scc["priority"], scc["defaultAddCapabilities"]) == (0, [])
    assert (restricted["priority"], restricted["defaultAddCapabilities"]) == (None, None)
    # Every volume type restricted-v2 allows today (csi, ephemeral, image included).
    assert scc["volumes"] == restricted["volumes"]


# --- NetworkAttachmentDefinitions --------------------------------------------------------------


def _filled(template: str, values: dict[str, str]) -> dict[str, Any]:
    """A NAD template with its placeholders replaced; the CNI config parsed from spec.config."""
    for placeholder, value in values.items():
        template = template.replace(placeholder, value)
    nad: dict[str, Any] = yaml.safe_load(template)
    nad["spec"]["config"] = json.loads(nad["spec"]["config"])
    return nad


IPAM = {"type": "whereabouts", "range": "10.0.104.0/24", "routes": [{"dst": "192.168.78.0/24"}]}

# NVIDIA network operator's HostDeviceNetwork NAD (Mellanox/network-operator
# manifests/state-hostdevice-network/0010-hostdevice-net-cr.yml at 9df5609), verbatim.
HOSTDEVICE_TEMPLATE = """\
apiVersion: "k8s.cni.cncf.io/v1"
kind: NetworkAttachmentDefinition
metadata:
  name: {{.HostDeviceNetworkName}}
  namespace: {{.CrSpec.NetworkNamespace}}
  annotations:
    k8s.v1.cni.cncf.io/resourceName: {{.ResourceName}}
spec:
  config: '{
  "cniVersion":"0.3.1",
  "name":"{{.HostDeviceNetworkName}}",
  "type":"host-device",
  "ipam":{{or .CrSpec.IPAM "{}"}}
}'
"""
HOSTDEVICE = _filled(
    HOSTDEVICE_TEMPLATE,
    {
        "{{.HostDeviceNetworkName}}": "eno6np0-network",
        "{{.CrSpec.NetworkNamespace}}": "nccl-test",
        "{{.ResourceName}}": "nvidia.com/hostdev",
        '{{or .CrSpec.IPAM "{}"}}': json.dumps(IPAM),
    },
)

# NVIDIA network operator's MacvlanNetwork NAD (Mellanox/network-operator
# manifests/state-macvlan-network/0010-macvlan-net-cr.yml at b06827e), filled with Master
# eno5np0, Mode bridge, Mtu 9000, the IPAM below and no MetaPlugins. The template:
#   "cniVersion":"0.3.1", "name":"{{.NetworkName}}", "type":"macvlan",
#   {{- if .Master -}} "master": "{{.Master}}", {{- if .Mode -}} "mode" : "{{.Mode}}",
#   {{- if .Mtu -}} "mtu" : {{.Mtu}}, {{.Ipam}}; metadata name/namespace, no annotations.
MACVLAN = {
    "apiVersion": "k8s.cni.cncf.io/v1",
    "kind": "NetworkAttachmentDefinition",
    "metadata": {"name": "eno5np0-network", "namespace": "nccl-test"},
    "spec": {
        "config": {
            "cniVersion": "0.3.1",
            "name": "eno5np0-network",
            "type": "macvlan",
            "master": "eno5np0",
            "mode": "bridge",
            "mtu": 9000,
            "ipam": {**IPAM, "range": "10.0.103.0/24", "routes": [{"dst": "192.168.77.0/24"}]},
        }
    },
}

# SR-IOV network operator's NAD for a SriovNetwork (k8snetworkplumbingwg/sriov-network-operator
# bindata/manifests/cni-config/sriov/sriov-cni-config.yaml at 249e200, rendered by
# api/v1/helper.go SriovNetwork.RenderNetAttDef), filled for a SriovNetwork that sets
# resourceName, networkNamespace and ipam only. The template writes "vlan" always, "vlanQoS"
# whenever it is 0..7 (its default 0), "spoofchk", "trust" and "link_state" only when the
# SriovNetwork sets spoofChk, trust or linkState, "logLevel" when set (the CRD defaults it to
# "info"), and no mtu (a SriovNetwork has none: the SriovNetworkNodePolicy sets the VF's MTU):
#   annotations k8s.v1.cni.cncf.io/resourceName: {{.SriovCniResourceName}},
#   sriovnetwork.openshift.io/owner-ref: {{.Owner}}; config "cniVersion":"1.0.0", "name",
#   "type", "vlan":{{.SriovCniVlan}}, {{- if .SpoofChkConfigured -}} "spoofchk":..., {{- if
#   .TrustConfigured -}} "trust":..., {{- if .VlanQoSConfigured -}} "vlanQoS":...,
#   {{- if .StateConfigured -}} "link_state":..., {{- if .LogLevelConfigured -}} "logLevel":...,
#   {{.SriovCniIpam}}
SRIOV_CONFIG: dict[str, Any] = {
    "cniVersion": "1.0.0",
    "name": "eno7np0-network",
    "type": "sriov",
    "vlan": 0,
    "vlanQoS": 0,
    "logLevel": "info",
    "ipam": {**IPAM, "range": "10.0.105.0/24", "routes": [{"dst": "192.168.79.0/24"}]},
}
SRIOV: dict[str, Any] = {
    "apiVersion": "k8s.cni.cncf.io/v1",
    "kind": "NetworkAttachmentDefinition",
    "metadata": {
        "name": "eno7np0-network",
        "namespace": "nccl-test",
        "annotations": {
            "k8s.v1.cni.cncf.io/resourceName": "openshift.io/eno7np0rdma",
            "sriovnetwork.openshift.io/owner-ref": "SriovNetwork.sriovnetwork.openshift.io/...",
        },
    },
    "spec": {"config": SRIOV_CONFIG},
}
# The same SriovNetwork with spoofChk: "off" and trust: "on" (what the seed's NADs set).
SRIOV_SPOOF_OFF_TRUSTED = {
    **SRIOV,
    "spec": {"config": {**SRIOV_CONFIG, "spoofchk": "off", "trust": "on"}},
}
SRIOV_CONFIG_DEVIATIONS = {
    "vlan": "omitted: without vlan sriov-cni leaves the VF's VLAN as it is, none on a VF no one "
    "tagged (k8snetworkplumbingwg/sriov-cni pkg/config/config.go LoadConf at 1b7acc5)",
    "vlanQoS": "omitted: sriov-cni refuses vlanQoS without vlan (the same LoadConf)",
    "logLevel": "omitted: sriov-cni logs at info without it (pkg/logging/logging.go at 1b7acc5)",
    "link_state": "enable, as the seed's NADs that Barcelona runs (the VF's link is up even "
    "while the PF's is down); not changed without a run on the hardware",
}
SRIOV_ANNOTATION_DEVIATIONS = {
    "sriovnetwork.openshift.io/owner-ref": "the NAD is ours, not a SriovNetwork's",
}

# (vendor object, config keys that differ -> reason, metadata annotations that differ -> reason)
NADS: dict[str, tuple[dict[str, Any], dict[str, str], dict[str, str]]] = {
    "host-device": (
        HOSTDEVICE,
        {"cniVersion": "1.0.0: host-device supports it (containernetworking/plugins >= 1.0)"},
        {},
    ),
    "macvlan": (
        MACVLAN,
        {"cniVersion": "1.0.0: macvlan supports it (containernetworking/plugins >= 1.0)"},
        {},
    ),
    "sriov": (SRIOV, SRIOV_CONFIG_DEVIATIONS, SRIOV_ANNOTATION_DEVIATIONS),
}

FLAVOURED = (
    *BARCELONA_CREATES_NADS,
    "rdma.mtu=9000",  # as the MacvlanNetwork above (Mtu 9000)
    "rdma.nics[0].flavour=macvlan",
    "rdma.nics[0].master=eno5np0",
    "rdma.nics[0].resource=rdma/rdma_shared_device_a",
    "rdma.nics[1].flavour=host-device",
    "rdma.nics[1].resource=nvidia.com/hostdev",
)


def _assert_matches(ours: dict[str, Any], vendor: dict[str, Any], flavour: str) -> None:
    _, config_deviations, annotation_deviations = NADS[flavour]
    assert (ours["apiVersion"], ours["kind"]) == (vendor["apiVersion"], vendor["kind"])
    assert ours["metadata"]["namespace"] == vendor["metadata"]["namespace"]
    theirs_annotations = vendor["metadata"].get("annotations", {})
    ours_annotations = ours["metadata"].get("annotations", {})
    assert differing_keys(ours_annotations, theirs_annotations) == set(annotation_deviations)
    config = json.loads(ours["spec"]["config"])
    assert differing_keys(config, vendor["spec"]["config"]) == set(config_deviations)


def _nad(name: str, *sets: str) -> dict[str, Any]:
    return next(
        n
        for n in manifests(run_stack("barcelona", *sets), "NetworkAttachmentDefinition")
        if n["metadata"]["name"] == name
    )


@pytest.mark.parametrize("flavour", sorted(NADS))
def test_nad_matches_the_operators_template_but_for_the_listed_deviations(flavour: str) -> None:
    vendor = NADS[flavour][0]
    _assert_matches(_nad(vendor["metadata"]["name"], *FLAVOURED), vendor, flavour)


def test_sriov_nad_sets_spoof_check_and_trust_only_as_the_stack_asks() -> None:
    """Unset, the NAD leaves both out (the VF keeps its flags), as the operator renders a
    SriovNetwork without spoofChk and trust; set, it carries them as the operator does."""
    nic = "rdma.nics[2]"
    asked = (*FLAVOURED, f"{nic}.spoofChk=off", f"{nic}.trust=on")
    _assert_matches(_nad("eno7np0-network", *asked), SRIOV_SPOOF_OFF_TRUSTED, "sriov")
    unset = json.loads(_nad("eno7np0-network", *FLAVOURED)["spec"]["config"])
    assert "spoofchk" not in unset and "trust" not in unset


def test_a_macvlan_nad_without_rdma_mtu_leaves_the_mtu_to_its_parent() -> None:
    # The operator's template writes "mtu" only `if .Mtu`; the macvlan plugin then gives the
    # interface its parent's MTU, and refuses one above it (containernetworking/plugins 3d27709
    # plugins/main/macvlan/macvlan.go loadConf: "invalid MTU %d, must be [0, master MTU(%d)]").
    unstated = tuple(key for key in FLAVOURED if not key.startswith("rdma.mtu="))
    # rdma.nics[0], the macvlan NIC
    config = json.loads(_nad("eno5np0-network", *unstated)["spec"]["config"])
    assert "mtu" not in config
    assert config["master"] == "eno5np0"


# --- the GPU Operator's DCGM host engine -------------------------------------------------------

GPU_OPERATOR = yaml.safe_load((VENDOR / "gpu_operator.yaml").read_text())
GPU_CHECK_RUNNER = (
    "workload.kind=jobset",
    "workload.command[0]=train.py",
    "workload.queue.topologyLevels[0]=example.com/rack",
    "workload.queue.healthGate.enabled=true",
    "workload.queue.healthGate.checks[0]=gpu",
    "workload.queue.healthGate.runner.enabled=true",
)


def test_the_gpu_check_runs_on_the_gpu_operator_s_host_engine_of_its_own_node() -> None:
    """The check's dcgmi goes to the operator's nvidia-dcgm Service in the operator's OpenShift
    namespace, whose internalTrafficPolicy Local keeps each pod on its own node's host engine;
    the check starts none (one host engine a node, the operator's, privileged). Its image is
    the operator's DCGM release."""
    service = GPU_OPERATOR["dcgm_service"]
    assert service["spec"]["internalTrafficPolicy"] == "Local"
    assert GPU_OPERATOR["dcgm"]["openshift_enabled"] is True
    (template,) = manifests(run_stack("nerc-production", *GPU_CHECK_RUNNER), "PodTemplate")
    (container,) = template["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    host = f"{service['metadata']['name']}.{GPU_OPERATOR['openshift_namespace']}.svc"
    assert env["DCGM_HOST_ENGINE"] == f"{host}:{service['spec']['ports'][0]['port']}"
    assert (
        container["image"] == f"nvcr.io/nvidia/cloud-native/dcgm:{GPU_OPERATOR['dcgm']['version']}"
    )
    # Unprivileged all the same: the privileged part is the operator's.
    assert container["securityContext"]["privileged"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_another_host_engine_or_the_check_s_own_is_a_config_edit() -> None:
    for value, expected in (
        ("own", "own"),
        ("nvidia-dcgm.gpu-operator.svc", "nvidia-dcgm.gpu-operator.svc:5555"),
    ):
        run = run_stack(
            "nerc-production",
            *GPU_CHECK_RUNNER,
            f"workload.queue.healthGate.runner.dcgmHostEngine={value}",
        )
        (template,) = manifests(run, "PodTemplate")
        (container,) = template["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["DCGM_HOST_ENGINE"] == expected
