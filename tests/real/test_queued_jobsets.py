"""Training queued as JobSets by Kueue (issue #19's groundwork), with the real managers at the
tier's versions (tools/realtier/build.py): Kueue admits a JobSet's Workload within a GPU quota and
places it with Topology Aware Scheduling, JobSet creates its Jobs, the real scheduler binds the
pods to fake GKE GPU nodes.

Four 8-GPU nodes in three GCE topology blocks; only block-2 has two nodes. A JobSet of two
8-GPU pods that requires one block can only go there; a second one waits, over quota, until the
first is deleted.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from tests.real.conftest import Cluster
from tests.real.queue_state import admitted, condition, explain, workload_of
from tools.realtier.kube import Kube, Object, wait_for
from tools.realtier.nodes import GCE_MACHINES, GKE_ACCELERATOR_LABEL, FakeNode

pytestmark = pytest.mark.real

KUEUE = "kueue.x-k8s.io/v1beta2"
JOBSET = "jobset.x-k8s.io/v1alpha2"
NAMESPACE = "training"
QUEUE = "training"
GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
QUOTA = 16
ACCELERATOR = "nvidia-h100-mega-80gb"
# GKE's node labels for a node's place in the physical topology: the block, sub-block and host
# of Compute Engine's physicalHostTopology (docs.cloud.google.com/compute/docs/instances/
# view-instance-topology), below them the node itself.
BLOCK = "cloud.google.com/gce-topology-block"
SUBBLOCK = "cloud.google.com/gce-topology-subblock"
HOST = "cloud.google.com/gce-topology-host"
HOSTNAME = "kubernetes.io/hostname"
# node -> (block, subblock, host)
NODES = {
    "gpu-0": ("block-1", "subblock-1", "host-0"),
    "gpu-1": ("block-2", "subblock-2", "host-1"),
    "gpu-2": ("block-2", "subblock-2", "host-2"),
    "gpu-3": ("block-3", "subblock-3", "host-3"),
}
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# The taint cluster-health-scanner's GPU check puts on a node that failed it
# (GoogleCloudPlatform/cluster-health-scanner 81c525d src/gpu_healthcheck/gpu_healthcheck.py).
FAILED_GPU_CHECK = {"key": "aiinfra/gpu-healthcheck", "value": "failed", "effect": "NoSchedule"}


def gpu_nodes() -> list[FakeNode]:
    vcpus, memory_gb = GCE_MACHINES["a3-megagpu-8g"]
    allocatable = {"cpu": str(vcpus), "memory": f"{memory_gb}G", GPU: str(GPUS_PER_NODE)}
    return [
        FakeNode(
            name,
            {GKE_ACCELERATOR_LABEL: ACCELERATOR, BLOCK: block, SUBBLOCK: subblock, HOST: host},
            [],
            allocatable,
        )
        for name, (block, subblock, host) in NODES.items()
    ]


def queues() -> list[Object]:
    """Topology, ResourceFlavor, ClusterQueue with the GPU quota, and the namespace's LocalQueue."""
    return [
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": "gke-gpu"},
            "spec": {"levels": [{"nodeLabel": k} for k in (BLOCK, SUBBLOCK, HOST, HOSTNAME)]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {"nodeLabels": {GKE_ACCELERATOR_LABEL: ACCELERATOR}, "topologyName": "gke-gpu"},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "gpus"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {"name": "h100", "resources": [{"name": GPU, "nominalQuota": QUOTA}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": NAMESPACE},
            "spec": {"clusterQueue": "gpus"},
        },
    ]


def training(name: str) -> Object:
    """Two pods of one Job, each a whole 8-GPU node, required within one block."""
    pod: dict[str, Any] = {
        "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": BLOCK}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "trainer", "image": "trainer", "resources": {"limits": {GPU: "8"}}}
            ],
        },
    }
    return {
        "apiVersion": JOBSET,
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": QUEUE},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "backoffLimit": 0,
                            "template": pod,
                        }
                    },
                }
            ]
        },
    }


def declined(kube: Kube, jobset: str) -> dict[str, Any] | None:
    """The QuotaReserved=False condition Kueue sets on a Workload it looked at and left queued."""
    workload = workload_of(kube, NAMESPACE, jobset)
    reserved = condition(workload, "QuotaReserved") if workload else None
    return reserved if reserved is not None and reserved["status"] == "False" else None


def running_jobs(kube: Kube, jobset: str) -> list[Object] | None:
    jobs = kube.list("batch/v1", "Job", NAMESPACE, label_selector=f"{JOBSET_NAME_LABEL}={jobset}")
    return jobs if jobs and not any(j["spec"].get("suspend") for j in jobs) else None


def placed_pods(kube: Kube, jobset: str) -> list[Object] | None:
    pods = kube.list("v1", "Pod", NAMESPACE, label_selector=f"{JOBSET_NAME_LABEL}={jobset}")
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return live if len(live) == 2 and all(p["spec"].get("nodeName") for p in live) else None


def assert_in_one_block(pods: list[Object]) -> None:
    """On two nodes of block-2 (the only block with two), each bound to the node Kueue's
    Topology Aware Scheduling assigned it (the hostname selector Kueue puts on the pod)."""
    nodes = sorted(p["spec"]["nodeName"] for p in pods)
    assert nodes == ["gpu-1", "gpu-2"]
    assert {NODES[n][0] for n in nodes} == {"block-2"}
    for pod in pods:
        assert pod["spec"].get("nodeSelector", {}).get(HOSTNAME) == pod["spec"]["nodeName"]


def test_kueue_admits_jobsets_within_quota_onto_one_block(queued_cluster: Cluster) -> None:
    cluster, kube = queued_cluster, queued_cluster.kube
    for node in gpu_nodes():
        kube.create(node.manifest())
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    kube.create_all(queues())
    why = functools.partial(explain, cluster, NAMESPACE)

    def active() -> bool:
        reported = condition(kube.get(KUEUE, "ClusterQueue", "gpus"), "Active")
        return reported is not None and reported["status"] == "True"

    wait_for("the ClusterQueue to be active", active, explain=why)

    kube.create(training("train-a"))
    workload = wait_for(
        "train-a admitted", functools.partial(admitted, kube, NAMESPACE, "train-a"), explain=why
    )
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 2
    assert assignment["resourceUsage"][GPU] == str(QUOTA)
    assert assignment["topologyAssignment"]["levels"]
    (job,) = wait_for(
        "train-a's Job running", functools.partial(running_jobs, kube, "train-a"), explain=why
    )
    assert job["spec"]["parallelism"] == 2
    assert_in_one_block(
        wait_for(
            "train-a's pods bound", functools.partial(placed_pods, kube, "train-a"), explain=why
        )
    )

    # The quota is spent: the second JobSet is queued, suspended, with no pods.
    kube.create(training("train-b"))
    reserved = wait_for(
        "train-b left queued", functools.partial(declined, kube, "train-b"), explain=why
    )
    assert reserved["reason"] == "Pending", reserved
    assert admitted(kube, NAMESPACE, "train-b") is None
    assert kube.get(JOBSET, "JobSet", "train-b", NAMESPACE)["spec"]["suspend"] is True
    assert kube.list("v1", "Pod", NAMESPACE, label_selector=f"{JOBSET_NAME_LABEL}=train-b") == []

    kube.delete(JOBSET, "JobSet", "train-a", NAMESPACE)
    wait_for(
        "train-b admitted", functools.partial(admitted, kube, NAMESPACE, "train-b"), explain=why
    )
    wait_for("train-b's Job running", functools.partial(running_jobs, kube, "train-b"), explain=why)
    assert_in_one_block(
        wait_for(
            "train-b's pods bound", functools.partial(placed_pods, kube, "train-b"), explain=why
        )
    )


def test_a_run_waits_rather_than_land_on_a_node_a_health_check_failed(
    queued_cluster: Cluster,
) -> None:
    """A node tainted by a health checker (cluster-health-scanner's failed GPU check) does not
    count for Topology Aware Scheduling: with gpu-2 tainted no block has two usable nodes, so
    the run stays queued, with no pods, instead of landing beside the bad node or across
    blocks; once the checker lifts the taint it is admitted into block-2."""
    cluster, kube = queued_cluster, queued_cluster.kube
    for node in gpu_nodes():
        taints = [FAILED_GPU_CHECK] if node.name == "gpu-2" else []
        kube.create(dataclasses.replace(node, taints=taints).manifest())
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    kube.create_all(queues())
    why = functools.partial(explain, cluster, NAMESPACE)

    kube.create(training("train-a"))
    reserved = wait_for(
        "train-a left queued", functools.partial(declined, kube, "train-a"), explain=why
    )
    assert FAILED_GPU_CHECK["key"] in reserved["message"], reserved
    assert kube.list("v1", "Pod", NAMESPACE, label_selector=f"{JOBSET_NAME_LABEL}=train-a") == []

    kube.merge_patch("v1", "Node", "gpu-2", None, {"spec": {"taints": None}})
    wait_for(
        "train-a admitted", functools.partial(admitted, kube, NAMESPACE, "train-a"), explain=why
    )
    assert_in_one_block(
        wait_for(
            "train-a's pods bound", functools.partial(placed_pods, kube, "train-a"), explain=why
        )
    )
