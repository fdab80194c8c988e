"""Every shipped stack comes up on the real API server (an OpenShift stack through `pulumi up`
of the real engine; a GKE stack's Kubernetes objects created as pulumi-kubernetes creates them,
one create call each in the render's order, since the engine cannot run its Google Cloud half
here): the real scheduler puts one training pod on each of the stack's fake GPU nodes, the node
agents run on every GPU node and nowhere else, every claim is bound and the workload becomes
Ready. So do two with more data volumes: gcp-a4 with a Managed Lustre instance besides its
buckets, and nerc-production with a shared checkpoint claim. gcp-a4 comes up in its StatefulSet
form; its queued JobSets come up in tests/real/test_jobset_stack.py.

For GKE stacks this is the Kubernetes half (the cluster and node pools are GCP's); the fake
nodes are the rendered pools' nodes as GKE labels and taints them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import STACKS, stack_context
from tests.edits import A4_STATEFULSET
from tests.real.cluster_state import (
    bring_up,
    claim_phase,
    paste,
    pods_of,
    start_on_record,
)
from tests.real.conftest import Cluster
from tools.realtier.nodes import GKE_ACCELERATOR_LABEL, GPU_PRESENT_LABEL
from tools.realtier.stacks import render

pytestmark = pytest.mark.real


VOLUME = "storage.volumes[2]"
# gcp-a4 ships queued JobSets, whose pods wait for a ProvisioningRequest and Kueue
# (tests/real/test_jobset_stack.py brings them up); here its StatefulSet form.
SHAPES = {stack: A4_STATEFULSET if stack == "gcp-a4" else () for stack in STACKS}
VARIANTS: list[tuple[str, tuple[str, ...]]] = [(stack, SHAPES[stack]) for stack in STACKS] + [
    (
        "gcp-a4",
        (
            f"{VOLUME}.name=scratch",
            f"{VOLUME}.mountPath=/lustre",
            f"{VOLUME}.managedLustre.instance=gke-lustre",
            f"{VOLUME}.managedLustre.capacityGib=36000",
            *A4_STATEFULSET,
        ),
    ),
    (
        "nerc-production",
        (
            "storage.volumes[0].name=checkpoints",
            "storage.volumes[0].mountPath=/checkpoints",
            "storage.volumes[0].sharedClaim.size=10Ti",
            "storage.volumes[0].sharedClaim.storageClass=nfs-csi",
        ),
    ),
]


@pytest.mark.parametrize(
    ("stack", "overrides"), VARIANTS, ids=[" ".join((s, *o))[:60] for s, o in VARIANTS]
)
def test_the_stack_comes_up_one_training_pod_per_gpu_node(
    cluster: Cluster, stack: str, overrides: tuple[str, ...], tmp_path: Path
) -> None:
    kube, stack_render = cluster.kube, render(stack, overrides)
    live, daemon_sets = bring_up(cluster, stack_render, overrides, tmp_path)
    pods = pods_of(kube, live)
    assert len(pods) == live["spec"]["replicas"] == stack_render.settings.nodes
    placed = [p["spec"]["nodeName"] for p in pods]
    assert len(set(placed)) == len(placed), f"two training pods share a node: {placed}"
    gpu_nodes = {
        n.name
        for n in stack_render.nodes()
        if GKE_ACCELERATOR_LABEL in n.labels or GPU_PRESENT_LABEL in n.labels
    }
    assert set(placed) <= gpu_nodes

    for ds_live in daemon_sets:
        assert ds_live["status"]["desiredNumberScheduled"] == len(gpu_nodes)
        assert {p["spec"]["nodeName"] for p in pods_of(kube, ds_live)} == gpu_nodes

    for claim in stack_render.of_kind("PersistentVolumeClaim"):
        assert claim_phase(kube, claim) == "Bound", claim["metadata"]["name"]
    # A bucket's claim is bound by the PV controller to the volume the stack writes (gcp-a4).
    for pv in stack_render.of_kind("PersistentVolume"):
        live = kube.get("v1", "PersistentVolume", pv["metadata"]["name"])
        assert live["status"]["phase"] == "Bound", pv["metadata"]["name"]
        assert live["spec"]["claimRef"]["uid"]  # bound to the live claim, not just named

    # timelineCommand, pasted as a user runs it (the real kubectl, the stack's context): every
    # phase of the start but the image pull (kwok pulls none) is on record, in order; with the
    # node agents' (GPUDirect installers, image pre-pull) Ready on the pods' nodes where the
    # stack has any.
    timeline = paste(
        cluster, tmp_path, stack_context(stack), stack_render.run.outputs["timelineCommand"]
    )
    names = start_on_record(timeline)
    assert "admitted" not in names
    assert ("agents ready" in names) == bool(stack_render.of_kind("DaemonSet")), timeline
