"""Nothing the user owns is lost: ordinary edits keep the claims, growing storage grows them in
place, edits that would strand or delete data stop at preview unless the stack opts in, and
`pulumi destroy` keeps user data unless the stack opts out.

What the engine would do is read from two real renders with gpu_cluster.offline.replacements (the
providers' replacement rules); `protect` on the previous render is what makes the engine refuse.
Here the claims and the namespace are registered with the options the switches ask for; what
`pulumi destroy --exclude-protected` then leaves is shown through the real engine
(tests/real/test_destroy_keeps_data.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import get_args

import pytest

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.loading import settings_from
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.storage import StorageSettings
from gpu_cluster.facts.gcp_catalog import GPU_MACHINE_ZONES
from gpu_cluster.offline.engine import ProgramRun, RecordedResource
from gpu_cluster.offline.replacements import Step, plan
from tests.as_of import AS_OF
from tests.conftest import (
    BARCELONA_RWX,
    GKE_RWX,
    STACKS,
    TO_GKE,
    manifests,
    one,
    plan_from,
    plan_of,
    rows,
    run_stack,
)
from tests.edits import A4_STATEFULSET, edited_config

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
STATEFUL_SET = "kubernetes:apps/v1:StatefulSet"
CLUSTER = "gcp:container/cluster:Cluster"
PER_POD = ["barcelona", "gcp-a3", "a3-high"]  # storage.mode per-pod
SHARED = ["nerc-production", "gcp-a4"]  # storage.mode rwx


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
    # The workload's own claims (a stack's data volumes are TrainingStorage's: test_volumes).
    claims = {
        r.inputs["metadata"]["name"] for r in run.of_type(PVC) if "TrainingWorkload" in r.parent
    }
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


def on_platform(stack: str, edit: str) -> tuple[str, ...]:
    """`edit` as the stack's platform takes it. On GKE a class nothing creates is refused:
    switch to one GKE installs; shared claims need a ReadWriteMany class (on barcelona too)."""
    if stack == "gcp-a4" and "other-class" in edit:  # its shared claims: another Filestore tier
        return ("storage.storageClass=premium-rwx",)
    if stack == "gcp-a4" and edit == "storage.mode=per-pod":  # per-pod claims: a StatefulSet's
        return A4_STATEFULSET
    if stack in GKE and "other-class" in edit:
        return ("storage.storageClass=standard-rwo",)
    if stack in GKE and edit == "storage.mode=rwx":
        return GKE_RWX
    if stack == "barcelona" and edit == "storage.mode=rwx":
        return BARCELONA_RWX
    return (edit,)


STRANDING_CASES = [
    (stack, on_platform(stack, edit))
    for stack in STACKS
    for edit in STRANDING_EDITS
    if edit != f"storage.mode={'per-pod' if stack in PER_POD else 'rwx'}"  # no change
]


@pytest.mark.parametrize(
    ("stack", "edit"), STRANDING_CASES, ids=[f"{s}:{' '.join(e)}" for s, e in STRANDING_CASES]
)
def test_edits_that_strand_or_delete_data_are_refused_unless_opted_in(
    stack: str, edit: tuple[str, ...]
) -> None:
    risky = [s for s in claim_steps(plan_of(stack, *edit)) if s.op in ("replace", "delete")]
    assert risky, "the edit touches no claim: the test would prove nothing"
    assert all(s.protected for s in risky), f"the engine would {risky} without asking"
    # The opt-in: a replacement goes through in the update that sets storage.protect false; a
    # deletion needs that update first (the engine reads `protect` of a deleted resource from
    # its state), then the edit.
    opted = [
        s
        for s in claim_steps(plan_of(stack, *edit, "storage.protect=false"))
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
    if stack in PER_POD:
        policy = one(run, "StatefulSet")["spec"].get("persistentVolumeClaimRetentionPolicy")
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
    # Another zone of the region that offers the stack's machine (the catalog's).
    gcp = settings_from(*edited_config(stack, ()), PROVIDER_SETTINGS, as_of=AS_OF)[0].gcp
    assert gcp is not None
    zone = next(z for z in GPU_MACHINE_ZONES[gcp.machine_type] if z != gcp.zone)
    moved = (f"gcp.region={zone.rpartition('-')[0]}", f"gcp.zone={zone}")
    replaced = [s for s in plan_of(stack, *moved) if s.type == CLUSTER]
    assert [(s.op, s.fields, s.protected) for s in replaced] == [("replace", ("location",), True)]
    (opted,) = run_stack(stack, "gcp.deletionProtection=false").of_type(CLUSTER)
    assert not opted.options["protect"] and opted.inputs["deletionProtection"] is False


# --- edits that take a namespace out of the program ------------------------------------------

NAMESPACE = "kubernetes:core/v1:Namespace"
NAMESPACE_MODES: tuple[str, ...] = get_args(Settings.model_fields["namespace_mode"].annotation)
# The storage keys that switch a safeguard off (docs/contract.md "Opt-in keys"): booleans.
STORAGE_SWITCHES = tuple(
    f"storage.{field.alias or name}"
    for name, field in StorageSettings.model_fields.items()
    if field.annotation is bool
)
RETAIN, PROTECT = "storage.retainOnDelete", "storage.protect"


def test_the_storage_switches_are_the_two_opt_in_keys() -> None:
    """A new switch changes what an opt-in is: the checks below must learn it first."""
    assert set(STORAGE_SWITCHES) == {RETAIN, PROTECT}
    assert set(NAMESPACE_MODES) == {"create", "adopt", "reference"}


def switch_settings() -> Iterator[tuple[str, ...]]:
    """Every combination of values of the storage switches, as --set overrides."""
    for values in itertools.product(("true", "false"), repeat=len(STORAGE_SWITCHES)):
        yield tuple(f"{key}={value}" for key, value in zip(STORAGE_SWITCHES, values, strict=True))


def namespace_edits(stack: str) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(deployed overrides, edit): the stack deployed in every namespaceMode with every
    combination of the switches, then moved to every other mode, to another namespace, or
    both, with the switches set to any combination in the same update; nerc-production also
    moved to GKE (a platform change)."""
    moves = [
        (f"namespaceMode={after}", *rename)
        for after in NAMESPACE_MODES
        for rename in ((), ("namespace=elsewhere",))
    ]
    for before, switches in itertools.product(NAMESPACE_MODES, list(switch_settings())):
        deployed = (f"namespaceMode={before}", *switches)
        for move, new_switches in itertools.product(moves, list(switch_settings())):
            if move != (f"namespaceMode={before}",):
                yield deployed, (*move, *new_switches)
        if stack == "nerc-production":
            yield deployed, TO_GKE


def settings_of(overrides: tuple[str, ...]) -> dict[str, str]:
    return dict(o.split("=", 1) for o in overrides if "=" in o)  # the last one wins; `!key` removes


def opted_in(deployed: tuple[str, ...], edit: tuple[str, ...], step: Step) -> bool:
    """docs/contract.md, opt-in keys: data may leave the cluster only when the state says not to
    retain it (the engine reads a removed or replaced resource's retainOnDelete from the state) and
    protect is off: in the state for a deletion, or in the update itself for a replacement."""
    state, wanted = settings_of(deployed), settings_of((*deployed, *edit))
    unprotected = state.get(PROTECT) == "false" or (
        step.op == "replace" and wanted.get(PROTECT) == "false"
    )
    return state.get(RETAIN) == "false" and unprotected


def refused(steps: list[Step]) -> list[Step]:
    """Steps the engine refuses: any one of them fails `pulumi preview`, and so the update."""
    return [s for s in steps if s.protected and s.op in ("replace", "delete")]


def deleted_from_cluster(steps: list[Step]) -> list[Step]:
    """Claims and namespaces (which take their claims along) whose object the engine would
    delete: replaced or deleted, neither refused nor retained."""
    return [
        s
        for s in steps
        if s.type in (PVC, NAMESPACE)
        and s.op in ("replace", "delete")
        and not (s.protected or s.retained)
    ]


# One stack per platform and storage layout: the namespace is the same component on every
# stack of a platform (the GKE stacks differ in hardware and networks, which no edit here
# touches), and each stack costs about 30 renders.
NAMESPACE_EDIT_STACKS = ["barcelona", "nerc-production", "gcp-a3"]


@pytest.mark.parametrize("stack", NAMESPACE_EDIT_STACKS)
def test_no_namespace_edit_deletes_a_claim_or_its_namespace_without_the_opt_in(
    stack: str,
) -> None:
    """Kubernetes deletes every claim in a deleted namespace, whatever the claims' protect. So
    a namespace the program created is retained, or else protected; an edit that takes it out
    of the program or replaces it stops at preview, or leaves it in the cluster, unless the
    stack opted out of both retention and protection."""
    unsafe, namespace_refused, opted_deletions = [], 0, 0
    for deployed, edit in namespace_edits(stack):
        steps = plan_from(stack, deployed, edit)
        deleted = deleted_from_cluster(steps)
        stopped = refused(steps)
        unasked = [s for s in deleted if not opted_in(deployed, edit, s)]
        if unasked and not stopped:
            unsafe.append(f"{deployed} -> {edit}: {[(s.op, s.type, s.name) for s in unasked]}")
        if any(s.type == NAMESPACE for s in stopped) and not claim_steps(stopped):
            namespace_refused += 1  # nothing but the namespace's own protect stops this edit
        if any(s.type == NAMESPACE for s in deleted) and not stopped:
            opted_deletions += 1
    assert unsafe == [], "\n".join(unsafe)
    # Not vacuous: the namespace's own protection stops edits that touch no claim (a mode
    # change of a created namespace that is not retained), and the full opt-out lets it go.
    assert namespace_refused and opted_deletions, (namespace_refused, opted_deletions)


@pytest.mark.parametrize("stack", STACKS)
def test_a_created_namespace_is_retained_or_protected_unless_both_are_lifted(stack: str) -> None:
    for switches in switch_settings():
        run = run_stack(stack, "namespaceMode=create", *switches)
        (namespace,) = training_namespaces(run)
        retain, protect = (settings_of(switches)[k] == "true" for k in (RETAIN, PROTECT))
        assert namespace.options["retainOnDelete"] is retain
        assert namespace.options["protect"] is (protect and not retain), switches
        # The premise: every claim lives in that namespace.
        assert {c["metadata"]["namespace"] for c in manifests(run, "PersistentVolumeClaim")} == {
            namespace.inputs["metadata"]["name"]
        }


def training_namespaces(run: ProgramRun) -> list[RecordedResource]:
    """The namespaces the claims live in: not those of the Kueue and JobSet controllers a GKE
    JobSet stack installs (they hold no claims; tests/test_queue_controllers.py)."""
    return [n for n in run.of_type(NAMESPACE) if "-queue-controllers-" not in n.name]
