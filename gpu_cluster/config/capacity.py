"""How a GKE stack's capacity type gets a multi-node run its nodes: all at once, or one by one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the loader calls these rules: the types only, at run time nothing
    from gpu_cluster.config.schema import Settings


def flex_start_gang_warnings(s: Settings) -> list[str]:
    """A warning when flex-start VMs serve more than one node without queued provisioning.
    Without it GKE obtains each node on its own as pods wait, so one node can arrive (and bill)
    while the run waits for the rest. Google: use flex-start with queued provisioning when "your
    workloads are required to run across multiple nodes simultaneously"; plain flex-start VMs for
    "smaller workloads that can run on a single node"; with queued provisioning "GKE allocates
    all requested resources at the same time" (docs.cloud.google.com/kubernetes-engine/docs/
    how-to/provisioningrequest, "How flex-start with queued provisioning works", read
    2026-11-28). Not a refusal: the nodes do come, and a stack deployed so keeps deploying."""
    gcp = s.gcp
    if gcp is None or gcp.provisioning != "flex-start" or gcp.queued_provisioning or s.nodes < 2:
        return []
    return [
        f"gpu-cluster:gcp.provisioning = 'flex-start' with gpu-cluster:nodes = {s.nodes} and "
        "gcp.queuedProvisioning false: GKE obtains each flex-start node on its own, so a node "
        "can arrive and bill while the run waits for the others; set gcp.queuedProvisioning: "
        "true (all of a run's nodes at once, or none; needs workload.kind 'jobset' with "
        "workload.queue.mode 'create'), or use gcp.provisioning 'reservation' (Google: flex-start "
        "without queued provisioning is for workloads that run on a single node)"
    ]
