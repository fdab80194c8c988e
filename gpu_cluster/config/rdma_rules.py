"""Rules across the keys of the `rdma` section: the NICs' interfaces, networks, subnets and
device-plugin resources."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from gpu_cluster.facts.kubernetes import POD_PRIMARY_INTERFACE

if TYPE_CHECKING:  # the loader calls these rules (through rules.py): the types only
    from gpu_cluster.config.sections.network import RdmaSettings


def rdma_problems(rdma: RdmaSettings, nodes: int) -> list[str]:
    out: list[str] = []
    if rdma.network_attachments != "reference":
        # What the NetworkAttachmentDefinition needs (a referenced one exists already).
        for i, nic in enumerate(rdma.nics):
            if nic.subnet is None:
                out.append(
                    f"gpu-cluster:rdma.nics[{i}].subnet is required when rdma.networkAttachments "
                    f"is {rdma.network_attachments!r} (the attachment's address range)"
                )
            if nic.flavour == "macvlan" and nic.master is None:
                out.append(
                    f"gpu-cluster:rdma.nics[{i}].master is required for flavour 'macvlan' (the "
                    "parent host interface)"
                )
    # Every pod network namespace has `lo` (containernetworking/plugins plugins/main/loopback).
    taken = {POD_PRIMARY_INTERFACE: "the pod's primary interface", "lo": "the pod's loopback"}
    taken.setdefault(rdma.bootstrap_interface, "rdma.bootstrapInterface (NCCL's bootstrap)")
    for i, nic in enumerate(rdma.nics):
        if nic.interface in taken:
            out.append(
                f"gpu-cluster:rdma.nics[{i}].interface = {nic.interface!r} is "
                f"{taken[nic.interface]}; name the RDMA interfaces net1, net2, ..."
            )
        if nic.subnet is None:
            continue
        # Whereabouts hands out the range's addresses minus network and broadcast
        # (k8snetworkplumbingwg/whereabouts pkg/allocate), one per pod.
        usable = max(ipaddress.IPv4Network(nic.subnet).num_addresses - 2, 0)
        if usable < nodes:
            out.append(
                f"gpu-cluster:rdma.nics[{i}].subnet {nic.subnet} has {usable} usable addresses "
                f"for {nodes} pods; use a larger range"
            )
    for attr, what in (("interface", "interface"), ("network", "network"), ("hca", "hca")):
        values = [getattr(nic, attr) for nic in rdma.nics if getattr(nic, attr) is not None]
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            out.append(
                f"gpu-cluster:rdma.nics: {what} {', '.join(dupes)} used by more than one NIC"
            )
    out.extend(_shared_pool_problems(rdma))
    hcas = [nic.hca for nic in rdma.nics]
    if any(hcas) and not all(hcas):
        out.append("gpu-cluster:rdma.nics: give 'hca' for every NIC or for none (detected)")
    nets = [(i, ipaddress.IPv4Network(n.subnet)) for i, n in enumerate(rdma.nics) if n.subnet]
    for k, (i, a) in enumerate(nets):
        for j, b in nets[k + 1 :]:
            if a.overlaps(b):
                out.append(
                    f"gpu-cluster:rdma.nics[{j}].subnet {b} overlaps rdma.nics[{i}].subnet "
                    f"{a}: each NIC needs its own subnet"
                )
    return out


# Flavours whose NIC is one device the kubelet allocates from the NIC's resource (an SR-IOV VF,
# a whole host device). Multus hands each attachment of a resource the next of the pod's devices
# of it, in the order the kubelet lists them (k8snetworkplumbingwg/multus-cni
# pkg/k8sclient/k8sclient.go getKubernetesDelegate, entry.Index++, at 95a0932): with two NICs on
# one pool, which port gets which NIC's subnet and routes is left to chance. macvlan NICs name
# their port themselves (`master`), so they may share the RDMA shared device plugin's resource.
ALLOCATED_FLAVOURS = ("sriov", "host-device")


def _shared_pool_problems(rdma: RdmaSettings) -> list[str]:
    """One resource per SR-IOV or host-device NIC, as rail-optimised setups configure it (one
    SriovNetworkNodePolicy, so one resource, per GPU's NIC: spidernet-io/spiderpool
    docs/usage/install/ai/get-started-sriov-roce.md at 2e2d3b9)."""
    by_resource: dict[str, list[int]] = {}
    for i, nic in enumerate(rdma.nics):
        if nic.flavour in ALLOCATED_FLAVOURS:
            by_resource.setdefault(nic.resource, []).append(i)
    return [
        "gpu-cluster:"
        + " = ".join(f"rdma.nics[{i}].resource" for i in shared)
        + f" = {resource!r}: sriov and host-device NICs get their pool's devices in the order "
        "the kubelet allocated them (Multus), so a NIC's subnet and routes can land on another "
        "rail's port and its traffic leave on the wrong rail; give each such NIC a resource of "
        "its own (one SriovNetworkNodePolicy or device-plugin selector per port); macvlan NICs "
        "may share one"
        for resource, shared in by_resource.items()
        if len(shared) > 1
    ]
