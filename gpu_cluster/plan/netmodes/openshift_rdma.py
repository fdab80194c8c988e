"""The pod of `rdma` on OpenShift (config/netmodes/openshift_rdma.py): the NICs Multus attaches,
their device-plugin resources, the detection init step, and the NetworkAttachmentDefinitions
the stack renders for them."""

from __future__ import annotations

import json
from typing import Any

from gpu_cluster.config.schema import Settings
from gpu_cluster.config.sections.network import NicSettings, RdmaSettings
from gpu_cluster.plan.nccl import NCCL_ENV_FILE, nccl_env
from gpu_cluster.plan.podspec import (
    SCRIPTS_DIR,
    SCRIPTS_VOLUME,
    ConfigMapVolume,
    Container,
    EmptyDir,
    Mount,
    PodNetworking,
)
from gpu_cluster.plan.security import memlock_machine_config_name

# Pod annotation Multus reads to attach extra networks (k8s.cni.cncf.io network-attachment spec).
MULTUS_NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
# NAD annotation that ties a network to its device-plugin resource (Multus reads it).
DEVICE_RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"
NCCL_ENV_VOLUME = "nccl-env"


# UID of the pod's other containers when the SCC assigns none (memlock root-ipc-lock sets
# runAsUser RunAsAny): "nobody", owner of nothing in the image.
UNPRIVILEGED_UID = 65534


def rdma_pod(s: Settings, scripts_config_map: str) -> PodNetworking:
    rdma = s.rdma
    assert rdma is not None  # the mode's rules require it
    networks = [
        {"name": nic.network, "namespace": s.namespace, "interface": nic.interface}
        for nic in rdma.nics
    ]
    # The RDMA layout also reaches the training container, for preflight.sh.
    rdma_layout = (
        ("RDMA_INTERFACES", ",".join(nic.interface for nic in rdma.nics)),
        # Paired by position; an empty entry means "detect this one".
        ("RDMA_HCAS", ",".join(nic.hca or "" for nic in rdma.nics)),
        ("RDMA_GID_INDEX", str(rdma.gid)),
    )
    as_root = rdma.memlock == "root-ipc-lock"
    env = {
        **nccl_env(s),
        **dict(rdma_layout),
        # preflight.sh names the memlock fix for this strategy, and checks a stated MTU.
        "MEMLOCK_STRATEGY": rdma.memlock,
        # preflight.sh fails a node without a GPUDirect RDMA path when the fabric check is to
        # require GDRDMA, and warns otherwise (scripts/gdr-path.sh).
        "GDR_REQUIRED": str(s.verify.enabled and s.verify.require_gdr).lower(),
    }
    if rdma.mtu is not None:
        env["RDMA_MTU"] = str(rdma.mtu)
    if rdma.memlock == "machineconfig":
        env["MEMLOCK_MACHINE_CONFIG"] = memlock_machine_config_name(rdma.machine_config_pool)
    init: tuple[Container, ...] = ()
    volumes: tuple[EmptyDir | ConfigMapVolume, ...] = ()
    mounts: tuple[Mount, ...] = ()
    if rdma.gid == "auto" or not all(nic.hca for nic in rdma.nics):
        # Per-pod facts (HCA behind each netN, its RoCE v2 IPv4 GID index) are only known
        # inside the pod, so an init step works them out and the launchers source the result.
        env_mount = Mount(NCCL_ENV_VOLUME, NCCL_ENV_FILE.rsplit("/", 1)[0])
        init = (
            Container(
                name="detect-rdma",
                image=s.image,
                command=(f"{SCRIPTS_DIR}/detect-rdma.sh",),
                env=(*rdma_layout, ("NCCL_ENV_FILE", NCCL_ENV_FILE)),
                mounts=(Mount(SCRIPTS_VOLUME, SCRIPTS_DIR, read_only=True), env_mount),
                run_as_user=UNPRIVILEGED_UID if as_root else None,
            ),
        )
        volumes = (EmptyDir(NCCL_ENV_VOLUME),)
        mounts = (Mount(NCCL_ENV_VOLUME, env_mount.path, read_only=True),)
    return PodNetworking(
        annotations={MULTUS_NETWORKS_ANNOTATION: json.dumps(networks, separators=(",", ":"))},
        env=env,
        resources=rdma_resources(rdma),
        # Verbs memory registration pins pages; past RLIMIT_MEMLOCK the kernel allows it only
        # with an effective CAP_IPC_LOCK (torvalds/linux drivers/infiniband/core/umem.c), which
        # a non-root UID never has. With memlock machineconfig/preconfigured the limit itself
        # is unlimited and the container stays non-root with no capability.
        capabilities=("IPC_LOCK",) if as_root else (),
        training_runs_as_root=as_root,
        init_containers=init,
        volumes=volumes,
        mounts=mounts,
    )


def rdma_resources(rdma: RdmaSettings) -> dict[str, int]:
    """Device-plugin resources: one VF per SR-IOV/host-device NIC; one shared-HCA unit per
    macvlan resource (the RDMA shared device plugin exposes every matched HCA with it)."""
    out: dict[str, int] = {}
    for nic in rdma.nics:
        if nic.flavour == "macvlan":
            out[nic.resource] = 1
        else:
            out[nic.resource] = out.get(nic.resource, 0) + 1
    return out


def network_attachment(nic: NicSettings, rdma: RdmaSettings, namespace: str) -> dict[str, Any]:
    """A Multus NetworkAttachmentDefinition (k8s.cni.cncf.io/v1) for one RDMA NIC.

    Shaped like the operators' templates (tests/vendor/ holds them with their sources):
    sriov as the SR-IOV network operator renders a SriovNetwork, host-device and macvlan as
    NVIDIA's network operator renders HostDeviceNetwork and MacvlanNetwork.
    """
    assert nic.subnet is not None  # required of a stack that renders its NADs (config/rules.py)
    ipam: dict[str, Any] = {"type": "whereabouts", "range": nic.subnet}
    if nic.routes:
        ipam["routes"] = [{"dst": r} for r in nic.routes]
    cni: dict[str, Any] = {"cniVersion": "1.0.0", "name": nic.network, "type": nic.flavour}
    if nic.flavour == "sriov":
        # No mtu: sriov-cni never sets it (the SriovNetworkNodePolicy's mtu does), so a NAD
        # value would only mislead (k8snetworkplumbingwg/sriov-cni pkg/sriov/sriov.go SetupVF).
        # spoofchk and trust only when the stack sets them, as the SR-IOV operator renders a
        # SriovNetwork (bindata/manifests/cni-config/sriov/sriov-cni-config.yaml at 249e200).
        flags = {"spoofchk": nic.spoof_chk, "trust": nic.trust}
        cni.update({key: value for key, value in flags.items() if value is not None})
        cni["link_state"] = "enable"
    elif nic.flavour == "macvlan":
        cni.update({"master": nic.master, "mode": "bridge"})
        if rdma.mtu is not None:
            # Without one the macvlan gets its parent's MTU, and one above the parent's fails
            # the pod's network setup (containernetworking/plugins 3d27709
            # plugins/main/macvlan/macvlan.go loadConf; torvalds/linux drivers/net/macvlan.c
            # macvlan_common_newlink).
            cni["mtu"] = rdma.mtu
    # host-device: no `device`; Multus passes the allocated one as deviceID
    # (k8snetworkplumbingwg/multus-cni pkg/types/conf.go delegateAddDeviceID).
    cni["ipam"] = ipam
    metadata: dict[str, Any] = {"name": nic.network, "namespace": namespace}
    if nic.flavour != "macvlan":
        # Ties the NAD to its device-plugin resource so Multus can hand the CNI the device
        # the kubelet allocated; the RDMA shared device plugin (macvlan) allocates none.
        metadata["annotations"] = {DEVICE_RESOURCE_ANNOTATION: nic.resource}
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": metadata,
        "spec": {"config": json.dumps(cni, indent=2)},
    }
