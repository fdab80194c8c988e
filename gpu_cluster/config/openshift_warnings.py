"""Warnings, not refusals, about what an OpenShift RDMA stack leaves to the cluster: the
cluster-wide settings it cannot see from the stack config (whereabouts' IP reconciler) or a
default that reaches further than the GPU nodes (the memlock MachineConfig's pool)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.config.netmodes import mode_of

if TYPE_CHECKING:  # the loader calls these: the types only, at run time nothing
    from gpu_cluster.config.schema import Settings

# The pool every worker node is in by default (MachineConfigPool `worker`, MCO docs).
DEFAULT_WORKER_POOL = "worker"


def rdma_warnings(s: Settings) -> list[str]:
    """What an OpenShift `rdma` stack should know before `pulumi up` (docs/operations.md,
    "OpenShift: RDMA addresses" and "OpenShift: RDMA memory locking")."""
    rdma = mode_of(s).rdma(s)
    if rdma is None:
        return []
    out = []
    if rdma.network_attachments != "reference":
        # The NADs the stack renders use whereabouts IPAM (plan/netmodes/openshift_rdma.py).
        # OpenShift runs whereabouts' reconciler only when the Network CR lists a whereabouts
        # network (openshift/cluster-network-operator pkg/network/multus_ipam.go
        # detectAuxiliaryIPAM at 0f229ae; openshift/openshift-docs modules/
        # nw-multus-creating-whereabouts-reconciler-daemon-set.adoc at 0ad95cf).
        out.append(
            f"gpu-cluster:rdma.networkAttachments = {rdma.network_attachments!r}: the NADs' "
            "whereabouts IPAM frees a pod's addresses only when the pod is deleted cleanly; "
            "after a node failure or a forced delete they stay taken until whereabouts' IP "
            "reconciler frees them, and OpenShift runs it (DaemonSet whereabouts-reconciler in "
            "openshift-multus) only once the Network CR lists a whereabouts network: a cluster "
            "admin adds one (docs/operations.md, 'OpenShift: RDMA addresses')"
        )
    pool_set = "machine_config_pool" in rdma.model_fields_set
    if rdma.memlock == "machineconfig" and not pool_set:
        out.append(
            f"gpu-cluster:rdma.machineConfigPool is unset: {DEFAULT_WORKER_POOL!r}, so the memlock "
            "MachineConfig lifts the limit for every container on every worker node, not only "
            "on the GPU nodes; set it to a MachineConfigPool of the GPU nodes (or to 'worker' "
            "to keep it, and this warning goes; docs/operations.md, 'OpenShift: RDMA memory "
            "locking')"
        )
    return out
