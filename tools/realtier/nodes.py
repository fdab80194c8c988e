"""Fake nodes as each platform labels, taints and sizes its GPU nodes, for kwok to run.

The nodes are built from what the platform would have, never from the pods that must land on
them: on GKE from the rendered node pools (machine type, accelerators, the pool's labels and
taints) plus the labels and the taint GKE itself adds; on OpenShift from the stack's declared
GPU hosts and the resources their device plugins advertise. The real scheduler then decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.machines import MACHINES
from gpu_cluster.offline.engine import ProgramRun
from tools.realtier.controlplane import FAKE_NODE_ANNOTATION

# Written out here rather than imported from the program: a misspelt key in the program must
# leave its pods unplaced, not label the fake nodes the same wrong way.
# GKE labels each node with its pool and, on GPU nodes, the accelerator type, and taints GPU
# nodes nvidia.com/gpu=present:NoSchedule (cloud.google.com/kubernetes-engine/docs/how-to/gpus).
GKE_POOL_LABEL = "cloud.google.com/gke-nodepool"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GKE_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# Nodes of a queued-provisioning pool also carry cloud.google.com/gke-queued=true:NoSchedule,
# which only pods of a ProvisioningRequest tolerate (cluster-toolkit 1047080 examples/
# gke-consumption-options/dws-flex-start-queued-provisioning/nccl-jobset-example.yaml).
GKE_QUEUED_TAINT = {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"}
_GKE_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}

# vCPUs and memory (GB) per machine type: the GPU machines' records (facts/machines.py) and the
# system pool's (cloud.google.com/compute/docs/general-purpose-machines: E2 standard, 4 GB per
# vCPU).
GCE_MACHINES: dict[str, tuple[int, int]] = {
    **{name: (m.vcpus, m.memory_gb) for name, m in MACHINES.items()},
    "e2-standard-4": (4, 16),
    "e2-standard-8": (8, 32),
    "e2-standard-16": (16, 64),
}

# NVIDIA GPU Operator's feature discovery labels every GPU node (gpu-feature-discovery,
# NVIDIA/k8s-device-plugin docs/gpu-feature-discovery: `nvidia.com/gpu.present`).
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
# An OpenShift GPU node's shape is not in any stack file; this is a generous H100 host
# (Barcelona's Dell XE9680-class nodes have more), so only GPUs, NICs and rules decide placement.
OPENSHIFT_GPU_HOST = {"cpu": "128", "memory": "1Ti"}
# SR-IOV VFs a node's device plugin advertises per resource (more than one pod ever needs).
VFS_PER_RESOURCE = 8


@dataclass(frozen=True)
class FakeNode:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    allocatable: dict[str, str]

    def manifest(self) -> dict[str, Any]:
        """A Node with status: kwok's node-initialize stage keeps the given allocatable."""
        resources = {"pods": "110", **self.allocatable}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    **self.labels,
                },
                "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"taints": self.taints} if self.taints else {},
            "status": {"allocatable": resources, "capacity": resources},
        }


def gke_nodes(run: ProgramRun, zone: str) -> list[FakeNode]:
    """Every node of every rendered pool at its planned size (flex-start: scaled up to its max)."""
    nodes = []
    for pool in run.of_type("gcp:container/nodePool:NodePool"):
        inputs = pool.inputs
        config = inputs.get("nodeConfig", {})
        machine = config["machineType"]
        vcpus, memory_gb = GCE_MACHINES[machine]
        labels = {
            GKE_POOL_LABEL: inputs["name"],
            "node.kubernetes.io/instance-type": machine,
            "topology.kubernetes.io/zone": zone,
            **config.get("labels", {}),
        }
        taints = [
            {"key": t["key"], "value": t.get("value", ""), "effect": _GKE_EFFECTS[t["effect"]]}
            for t in config.get("taints", [])
        ]
        allocatable = {"cpu": str(vcpus), "memory": f"{memory_gb}G"}
        accelerators = config.get("guestAccelerators", [])
        if accelerators:
            labels[GKE_ACCELERATOR_LABEL] = accelerators[0]["type"]
            if not any(t["key"] == GKE_GPU_TAINT["key"] for t in taints):
                taints.append(GKE_GPU_TAINT)
            allocatable["nvidia.com/gpu"] = str(accelerators[0]["count"])
        if (inputs.get("queuedProvisioning") or {}).get("enabled"):
            taints.append(GKE_QUEUED_TAINT)
        nodes += [
            FakeNode(f"gke-{inputs['name']}-{i}", labels, taints, allocatable)
            for i in range(_planned_size(inputs))
        ]
    return nodes


def _planned_size(pool: dict[str, Any]) -> int:
    """A fixed pool's size; an autoscaled one at its minimum, or at its maximum when the minimum
    is 0 (flex-start: the autoscaler adds nodes for the pending training pods)."""
    if pool.get("nodeCount"):
        return int(pool["nodeCount"])
    autoscaling = pool.get("autoscaling", {})
    low = autoscaling.get("totalMinNodeCount", autoscaling.get("minNodeCount", 0))
    high = autoscaling.get("totalMaxNodeCount", autoscaling.get("maxNodeCount", 0))
    return int(low or high)


def openshift_nodes(settings: Settings) -> list[FakeNode]:
    """The stack's GPU hosts (openshift.nodeNames, or one per training pod when none are named),
    with the GPUs and the SR-IOV/RDMA resources the stack says its NICs come from."""
    names = list(settings.openshift.node_names) or [f"gpu-node-{i}" for i in range(settings.nodes)]
    allocatable = {**OPENSHIFT_GPU_HOST, "nvidia.com/gpu": str(settings.gpus_per_node)}
    rdma = mode_of(settings).rdma(settings)
    if rdma is not None:
        allocatable |= {nic.resource: str(VFS_PER_RESOURCE) for nic in rdma.nics}
    return [FakeNode(name, {GPU_PRESENT_LABEL: "true"}, [], allocatable) for name in names]
