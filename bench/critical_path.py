"""Critical-path model of `pulumi up` from scratch: when each stack's training pods are ready.

    python bench/critical_path.py [--stacks gcp-a3,barcelona]

Renders each stack offline, reads the order `pulumi up` creates its resources in from the
render (gpu_cluster/offline/graph.py: dependsOn, provider and parent edges), gives every
resource a duration by kind (ESTIMATES, each with its source) and starts everything as soon as
what it waits for is done. Prints, per stack, when the training pods are ready (the first step
can start once the launcher runs) and when the cluster's own objects are all in place, for the
graph as it is and as it was before issue #20 (the Kubernetes provider waiting for the GPU
pool, added back to the model), and for a GKE stack with its image preloaded on the GPU nodes'
secondary boot disks (gcp.secondaryBootDiskImage), then each stack's critical path. An OpenShift
stack with openshift.prePull pulls the image in its pre-pull DaemonSet, which the training pods
wait for, so they start without a pull. A model,
not a measurement: nothing is asserted; the exit code is 0 whenever every stack rendered.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from gpu_cluster.components.gke_cluster import SYSTEM_POOL  # noqa: E402
from gpu_cluster.offline.graph import PROVIDER_TYPE_PREFIX, Graph  # noqa: E402
from gpu_cluster.offline.render import render  # noqa: E402
from gpu_cluster.plan.podspec import PRE_PULL_COMPONENT  # noqa: E402

STACKS = tuple(
    sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in PROJECT_DIR.glob("Pulumi.*.yaml"))
)


@dataclass(frozen=True)
class Estimate:
    minutes: float
    source: str


# Size of the training image and how fast a new node pulls it.
IMAGE_GB = 20.0  # nvcr.io/nvidia/pytorch is about 20 GB (d4l3k/torchdrive#4)
# 10-50 GB AI/ML images take 5-15 min on a new node (kubernetes.recipes/recipes/configuration/
# image-pull-optimization-kubernetes): 2 GB/min is the slow end (10 GB in 5 min).
PULL_GB_PER_MINUTE = 2.0
# GPUs become allocatable about 1 min after the node is Ready (cloudpilot-ai/
# karpenter-provider-gcp#148).
GPUS_AFTER_NODE_READY_MINUTES = 1.0

ESTIMATES = {
    "gke-cluster": Estimate(10, "5-10 min from the console (crossplane-contrib/provider-gcp#235)"),
    "cpu-pool": Estimate(10, "5-10 min per node pool (twosigma/Cook#1234)"),
    "gpu-pool": Estimate(35, "a GPU cluster's pool took ~35 min (NVIDIA/aicr#2065)"),
    "cloud-object": Estimate(
        0.5, "VPC, subnet, firewall, router, NAT, IAM: assumed, no published figure"
    ),
    "node-agents": Estimate(
        2, "DaemonSet on new GPU nodes (a small image and a copy): assumed, no published figure"
    ),
    "image-pre-pull": Estimate(
        IMAGE_GB / PULL_GB_PER_MINUTE,
        f"every node pulls a {IMAGE_GB:g} GB image at {PULL_GB_PER_MINUTE:g} GB/min, all at once",
    ),
    "training-pods": Estimate(
        GPUS_AFTER_NODE_READY_MINUTES + IMAGE_GB / PULL_GB_PER_MINUTE,
        f"GPUs allocatable ({GPUS_AFTER_NODE_READY_MINUTES:g} min) + a {IMAGE_GB:g} GB image at "
        f"{PULL_GB_PER_MINUTE:g} GB/min (sources beside IMAGE_GB, PULL_GB_PER_MINUTE)",
    ),
    "training-pods-preloaded": Estimate(
        GPUS_AFTER_NODE_READY_MINUTES,
        "GPUs allocatable; the image is on the node's secondary boot disk, made with the node "
        "(GKE: 'does not increase the node provisioning time', data-container-image-preloading): "
        "no pull, the container's start from the disk assumed to take no time",
    ),
    "training-pods-pre-pulled": Estimate(
        GPUS_AFTER_NODE_READY_MINUTES,
        "GPUs allocatable; the image pre-pull DaemonSet they wait for has put the image on "
        "their nodes: the container's start assumed to take no time",
    ),
    "controller-chart": Estimate(
        1, "Kueue's or JobSet's chart: a small controller image pulled and started, assumed"
    ),
    "kubernetes-object": Estimate(1 / 60, "one API request: assumed 1 s"),
    "none": Estimate(0, "components and providers: the engine answers at once"),
}


def estimate_of(row: Mapping[str, Any]) -> str:
    """The ESTIMATES key of a resources.json row."""
    type_ = str(row["type"])
    if type_ == "gcp:container/cluster:Cluster":
        return "gke-cluster"
    if type_ == "gcp:container/nodePool:NodePool":
        return "cpu-pool" if row["inputs"]["name"] == SYSTEM_POOL else "gpu-pool"
    if type_.startswith("gcp:"):
        return "cloud-object"
    if type_ == "kubernetes:helm.sh/v4:Chart":
        return "controller-chart"
    if type_.startswith("kubernetes:"):
        # From the type: a read (a JobSet stack's CRDs on OpenShift) has no inputs.
        kind = type_.rsplit(":", 1)[1]
        if kind == "DaemonSet":
            labels = row["inputs"]["metadata"].get("labels") or {}
            pre_pull = labels.get("app.kubernetes.io/component") == PRE_PULL_COMPONENT
            return "image-pre-pull" if pre_pull else "node-agents"
        pods = {"StatefulSet": "training-pods", "JobSet": "training-pods"}
        return pods.get(kind, "kubernetes-object")
    return "none"


def preloaded(g: Graph) -> bool:
    """Whether the GPU pool's nodes come with the image on a secondary boot disk."""
    return any(
        estimate_of(r) == "gpu-pool" and r["inputs"]["nodeConfig"].get("secondaryBootDisks")
        for r in g.rows.values()
    )


def pre_pulled(g: Graph) -> bool:
    """Whether the training pods wait for an image pre-pull DaemonSet (openshift.prePull)."""
    return any(estimate_of(r) == "image-pre-pull" for r in g.rows.values())


def minutes(g: Graph) -> Callable[[str], float]:
    pods = "training-pods"
    if preloaded(g):
        pods = "training-pods-preloaded"
    elif pre_pulled(g):
        pods = "training-pods-pre-pulled"

    def of(urn: str) -> float:
        key = estimate_of(g.rows[urn])
        return ESTIMATES[pods if key == "training-pods" else key].minutes

    return of


def before_issue_20(g: Graph) -> Graph | None:
    """The graph with the Kubernetes provider waiting for the GPU pool again, or None for a
    stack without one (OpenShift)."""
    provider = [u for u, r in g.rows.items() if r["type"] == f"{PROVIDER_TYPE_PREFIX}kubernetes"]
    pools = [u for u, r in g.rows.items() if estimate_of(r) == "gpu-pool"]
    if not provider or not pools:
        return None
    return g.with_edge(provider[0], pools[0], "dependsOn (before #20)")


@dataclass(frozen=True)
class Times:
    pods_ready: float
    cluster_objects: float  # every Kubernetes object but the pods and node agents


def times(g: Graph) -> Times:
    finish = g.finish_times(minutes(g))
    kinds = {u: estimate_of(r) for u, r in g.rows.items()}
    return Times(
        pods_ready=max(finish[u] for u, k in kinds.items() if k == "training-pods"),
        cluster_objects=max(
            (finish[u] for u, k in kinds.items() if k == "kubernetes-object"), default=0.0
        ),
    )


# What a GKE stack sets to preload its image (any disk image name: the model reads only that
# the pool has one).
PRELOAD = (
    "gcp.imageStreaming=true",
    "gcp.secondaryBootDiskImage=projects/my-gpu-project/global/images/training-image",
)


def report(stacks: list[str]) -> str:
    table = [
        "| stack | pods ready, min | before #20 | image preloaded | cluster objects in place, "
        "min | before #20 |",
        "|---|---|---|---|---|---|",
    ]
    paths = []
    for stack in stacks:
        g = Graph(json.loads(render(stack)["resources.json"]))
        now = times(g)
        old_graph = before_issue_20(g)
        old = times(old_graph) if old_graph is not None else now
        fast = "-"
        if old_graph is not None:  # GKE
            preloaded_graph = Graph(json.loads(render(stack, PRELOAD)["resources.json"]))
            fast = f"{times(preloaded_graph).pods_ready:.1f}"
        table.append(
            f"| {stack} | {now.pods_ready:.1f} | {old.pods_ready:.1f} | {fast} | "
            f"{now.cluster_objects:.1f} | {old.cluster_objects:.1f} |"
        )
        cost = minutes(g)
        finish = g.finish_times(cost)
        (pods,) = [u for u, r in g.rows.items() if estimate_of(r) == "training-pods"]
        steps = [
            f"{g.label(u)} ({cost(u):.2f})"
            for u in g.critical_path(pods, finish)
            if estimate_of(g.rows[u]) != "none"
        ]
        paths.append(f"- {stack}: " + " -> ".join(steps))
    sources = [f"- {key}: {e.minutes:.2f} min, {e.source}" for key, e in ESTIMATES.items()]
    return "\n".join(
        [
            *table,
            "",
            "Critical path to the pods (minutes):",
            *paths,
            "",
            "Durations:",
            *sources,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stacks", default=",".join(STACKS), help="comma-separated stacks")
    args = parser.parse_args(argv)
    print(report([s for s in args.stacks.split(",") if s]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
