"""Nothing the user owns is lost: ordinary edits keep the claims, growing storage grows them in
place, edits that would strand or delete data stop at preview unless the stack opts in, and
`pulumi destroy` keeps user data unless the stack opts out.

What the engine would do is read from two real renders with gpu_cluster.offline.replacements (the
providers' replacement rules); `protect` on the previous render is what makes the engine refuse.
"""

from __future__ import annotations

import pytest

from gpu_cluster.offline.replacements import Step, plan
from tests.conftest import STACKS, manifests, one, plan_of, rows, run_stack

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
STATEFUL_SET = "kubernetes:apps/v1:StatefulSet"
CLUSTER = "gcp:container/cluster:Cluster"
PER_POD = ["barcelona", "gcp-a3", "a3-high", "gcp-a4"]  # storage.mode per-pod
SHARED = ["nerc-production"]  # storage.mode rwx


def claim_steps(steps: list[Step]) -> list[Step]:
    return [s for s in steps if s.type == PVC]


@pytest.mark.parametrize("stack", STACKS)
def test_growing_storage_grows_the_existing_claims_in_place(stack: str) -> None:
    steps = plan_of(stack, "storage.workspaceSize=2Ti", "storage.datasetsSize=4Ti")
    claims = claim_steps(steps)
    assert claims, "no claim would change: the edit proves nothing"
    assert {s.op for s in claims} == {"update"}, claims
    # Nothing else changes: above all, the StatefulSet is neither replaced nor updated (its
    # volumeClaimTemplates are immutable; the claims carry the size).
    assert {s.type for s in steps} == {PVC}, steps
    for claim in manifests(run_stack(stack, "storage.workspaceSize=2Ti"), "PersistentVolumeClaim"):
        if "workspace" in claim["metadata"]["name"]:
            assert claim["spec"]["resources"]["requests"]["storage"] == "2Ti"


@pytest.mark.parametrize("stack", PER_POD)
def test_per_pod_claims_are_the_ones_the_stateful_set_would_create(stack: str) -> None:
    run = run_stack(stack)
    sts = one(run, "StatefulSet")
    name, nodes = sts["metadata"]["name"], sts["spec"]["replicas"]
    templates = [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]]
    claims = {c["metadata"]["name"] for c in manifests(run, "PersistentVolumeClaim")}
    assert claims == {f"{t}-{name}-{i}" for t in templates for i in range(nodes)}
    # Claims exist before the pods that mount them.
    (sts_resource,) = run.of_type(STATEFUL_SET)
    assert {r.urn for r in run.of_type(PVC)} <= set(sts_resource.options["dependsOn"])


GKE = ["gcp-a3", "a3-high", "gcp-a4"]
STRANDING_EDITS = [
    "storage.storageClass=other-class",  # immutable on a claim: replaced
    "name=renamed",  # new claim names: users would land on empty volumes
    "namespace=elsewhere",
    "storage.mode=rwx",  # the per-pod claims would be deleted
    "storage.mode=per-pod",  # the shared claims would be deleted
]
STRANDING_CASES = [
    # On GKE a class nothing creates is refused: switch to one GKE installs (or the stack's own).
    (stack, "storage.storageClass=standard-rwo" if "other-class" in edit and stack in GKE else edit)
    for stack in STACKS
    for edit in STRANDING_EDITS
    if edit != f"storage.mode={'per-pod' if stack in PER_POD else 'rwx'}"  # no change
]


@pytest.mark.parametrize(
    ("stack", "edit"), STRANDING_CASES, ids=[f"{s}:{e}" for s, e in STRANDING_CASES]
)
def test_edits_that_strand_or_delete_data_are_refused_unless_opted_in(
    stack: str, edit: str
) -> None:
    risky = [s for s in claim_steps(plan_of(stack, edit)) if s.op in ("replace", "delete")]
    assert risky, "the edit touches no claim: the test would prove nothing"
    assert all(s.protected for s in risky), f"the engine would {risky} without asking"
    # The opt-in: a replacement goes through in the update that sets storage.protect false; a
    # deletion needs that update first (the engine reads `protect` of a deleted resource from
    # its state), then the edit.
    opted = [
        s
        for s in claim_steps(plan_of(stack, edit, "storage.protect=false"))
        if s.op in ("replace", "delete")
    ]
    assert {(s.name, s.op) for s in opted} == {(s.name, s.op) for s in risky}
    assert {s.op for s in opted if s.protected} <= {"delete"}
    assert not any(
        r.options["protect"] for r in run_stack(stack, "storage.protect=false").of_type(PVC)
    )


def test_scaling_a_per_pod_stack_down_keeps_the_claims_of_removed_pods() -> None:
    risky = claim_steps(plan_of("barcelona", "nodes=1"))
    assert {(s.op, s.name) for s in risky} == {
        ("delete", "gpu-cluster-workload-workspace-1"),
        ("delete", "gpu-cluster-workload-datasets-1"),
    }
    assert all(s.protected for s in risky)
    # After an update with the opt-in, the claims leave the stack but stay in the cluster.
    opted = run_stack("barcelona", "storage.protect=false")
    assert all(r.options["retainOnDelete"] for r in opted.of_type(PVC))
    assert not any(
        s.protected
        for s in claim_steps(
            plan(rows(opted), rows(run_stack("barcelona", "storage.protect=false", "nodes=1")))
        )
    )


@pytest.mark.parametrize("stack", STACKS)
def test_claims_are_protected_and_survive_destroy_by_default(stack: str) -> None:
    run = run_stack(stack)
    claims = run.of_type(PVC)
    assert claims, stack
    assert all(c.options["protect"] and c.options["retainOnDelete"] for c in claims), stack
    policy = one(run, "StatefulSet")["spec"].get("persistentVolumeClaimRetentionPolicy")
    if stack in PER_POD:
        assert policy == {"whenDeleted": "Retain", "whenScaled": "Retain"}


@pytest.mark.parametrize("stack", PER_POD)
def test_a_replaced_stateful_set_never_takes_the_claims_along(stack: str) -> None:
    """Even with storage.retainOnDelete false: the StatefulSet is replaced when a volume is
    added or removed, and a Delete policy would garbage-collect the claims with it."""
    sts = one(run_stack(stack, "storage.retainOnDelete=false"), "StatefulSet")
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"


@pytest.mark.parametrize("stack", STACKS)
def test_destroy_deletes_user_data_only_when_the_stack_opts_out(stack: str) -> None:
    claims = run_stack(stack, "storage.retainOnDelete=false").of_type(PVC)
    assert claims and not any(c.options["retainOnDelete"] for c in claims)


@pytest.mark.parametrize("stack", GKE)
def test_gke_cluster_is_protected_against_replacement_and_deletion(stack: str) -> None:
    (cluster,) = run_stack(stack).of_type(CLUSTER)
    assert cluster.options["protect"] and cluster.inputs["deletionProtection"] is True
    replaced = [s for s in plan_of(stack, "gcp.zone=us-central1-f") if s.type == CLUSTER]
    assert [(s.op, s.fields, s.protected) for s in replaced] == [("replace", ("location",), True)]
    (opted,) = run_stack(stack, "gcp.deletionProtection=false").of_type(CLUSTER)
    assert not opted.options["protect"] and opted.inputs["deletionProtection"] is False
