"""Existing stacks keep their resources across refactors: every URN a shipped stack had before
the components were cut (tests/fixtures/urns_before_issue15.json, recorded from ef30eb1) is
still some resource's URN or one of its aliases, so `pulumi up` replaces nothing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from gpu_cluster.offline.engine import resource_urn, run_program
from gpu_cluster.offline.render import render
from tests.conftest import BARCELONA_CREATES_NADS, BARCELONA_NAD_RANGES, GKE_RWX, STACKS, run_stack

BEFORE = json.loads(
    (Path(__file__).resolve().parent / "fixtures" / "urns_before_issue15.json").read_text()
)


# Stacks first shipped after the cut: they had no earlier URNs to keep.
ADDED_AFTER_CUT = {"gcp-a4"}


def test_every_shipped_stack_was_recorded() -> None:
    assert sorted(BEFORE) == sorted(set(STACKS) - ADDED_AFTER_CUT)


@pytest.mark.parametrize("stack", sorted(BEFORE))
def test_every_earlier_urn_still_resolves(stack: str) -> None:
    run = run_stack(stack)
    resolves = {r.urn for r in run.resources} | {a for r in run.resources for a in r.aliases}
    lost = [urn for urn in BEFORE[stack] if urn not in resolves]
    assert not lost, f"{stack}: these URNs are neither kept nor aliased:\n" + "\n".join(lost)


# The same, for stacks with every optional piece (created namespace, NADs, the memlock
# MachineConfig, an adopted namespace, shared storage), recorded from ef30eb1 with these --sets.
VARIANTS = json.loads(
    (Path(__file__).resolve().parent / "fixtures" / "urns_before_issue15_variants.json").read_text()
)


@pytest.mark.parametrize("stack", sorted(VARIANTS))
def test_every_earlier_urn_of_the_optional_pieces_still_resolves(stack: str) -> None:
    # Barcelona's NAD ranges left its stack file when it stopped setting keys it does not read.
    ranges = BARCELONA_NAD_RANGES if stack == "barcelona" else ()
    # Shared claims on GKE need a ReadWriteMany class since (a class is in no URN).
    overrides = VARIANTS[stack]["overrides"]
    shared = GKE_RWX if stack == "gcp-a3" and "storage.mode=rwx" in overrides else ()
    run = run_stack(stack, *overrides, *ranges, *shared)
    resolves = {r.urn for r in run.resources} | {a for r in run.resources for a in r.aliases}
    lost = [urn for urn in VARIANTS[stack]["urns"] if urn not in resolves]
    assert not lost, f"{stack}: these URNs are neither kept nor aliased:\n" + "\n".join(lost)
    assert set(VARIANTS[stack]["urns"]) - set(BEFORE[stack])  # the pieces were recorded


@pytest.mark.parametrize("stack", STACKS)
def test_no_urn_or_alias_is_claimed_twice(stack: str) -> None:
    # Two resources answering to one URN would make the engine adopt the wrong one.
    run = run_stack(stack)
    claims = Counter([r.urn for r in run.resources] + [a for r in run.resources for a in r.aliases])
    assert [urn for urn, n in claims.items() if n > 1] == []


@pytest.mark.parametrize("stack", STACKS)
def test_resources_json_records_urns_and_aliases(stack: str) -> None:
    rows = json.loads(render(stack)["resources.json"])
    run = run_stack(stack)
    assert {(row["urn"], tuple(row["aliases"])) for row in rows} == {
        (r.urn, r.aliases) for r in run.resources
    }


def test_urns_carry_the_whole_parent_type_chain() -> None:
    parent = "urn:pulumi:s::p::a:b:Outer$a:b:Inner::inner"
    assert resource_urn("s", "p", parent, "k:v1:Pod", "x") == (
        "urn:pulumi:s::p::a:b:Outer$a:b:Inner$k:v1:Pod::x"
    )
    stack_root = "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"
    assert resource_urn("s", "p", stack_root, "k:v1:Pod", "x") == "urn:pulumi:s::p::k:v1:Pod::x"
    assert resource_urn("s", "p", "", "k:v1:Pod", "x") == "urn:pulumi:s::p::k:v1:Pod::x"
    nested = {r.urn for r in run_stack("barcelona").resources if r.type.endswith("StatefulSet")}
    assert nested == {
        "urn:pulumi:barcelona::gpu-cluster::gpu-cluster:openshift:OpenShiftPlatform"
        "$gpu-cluster:workload:TrainingWorkload$kubernetes:apps/v1:StatefulSet::gpu-cluster-workload"
    }


# Components cut out of the platforms: their children used to be the platform's own.
CUT_FROM_PLATFORM = {
    "gpu-cluster:gcp_vpc:GpuVpcs",
    "gpu-cluster:gke_cluster:GkeCluster",
    "gpu-cluster:gpu_pool:GpuNodePool",
    "gpu-cluster:gpudirect_nodes:GpuDirectNodes",
    "gpu-cluster:namespace:TrainingNamespace",
    "gpu-cluster:training_access:TrainingAccess",
    "gpu-cluster:rdma_networks:RdmaNetworks",
}
# Every piece in use: a created namespace, created NADs and the memlock MachineConfig.
OPENSHIFT_ALL_PIECES = (
    "namespaceMode=create",
    *BARCELONA_CREATES_NADS,
    "rdma.memlock=machineconfig",
)


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [*((s, ()) for s in STACKS), ("barcelona", OPENSHIFT_ALL_PIECES)],
)
def test_children_of_cut_components_answer_to_their_urn_under_the_platform(
    stack: str, overrides: tuple[str, ...]
) -> None:
    # Beyond the recorded stacks: any stack's resource in a cut component is aliased to the URN
    # the platform gave it before the cut (same type and name, the platform as parent).
    run = run_stack(stack, *overrides)
    by_urn = {r.urn: r for r in run.resources}
    moved = [
        r
        for r in run.resources
        if r.parent in by_urn and by_urn[r.parent].type in CUT_FROM_PLATFORM
    ]
    assert moved
    for r in moved:
        platform = by_urn[r.parent].parent
        old = resource_urn(stack, "gpu-cluster", platform, r.type, r.name)
        assert old in r.aliases, r.urn
    if overrides:
        kinds = {r.type.rsplit(":", 1)[-1] for r in moved}
        assert {"Namespace", "NetworkAttachmentDefinition", "MachineConfig"} <= kinds


NESTED_MOVE = """
import pulumi
from gpu_cluster.components.moved import moved_from

class Box(pulumi.ComponentResource):
    def __init__(self, type_: str, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_, name, None, opts)

platform = Box("t:m:Platform", "p")
cut = Box("t:m:Cut", "p-cut", moved_from(platform))
inner = Box("t:m:Inner", "p-inner", pulumi.ResourceOptions(parent=cut))
Box("t:m:Leaf", "p-inner-leaf", pulumi.ResourceOptions(parent=inner))
"""


def test_a_component_moved_with_its_children_aliases_them_under_its_old_urn(
    tmp_path: Path,
) -> None:
    # `inner` (with its leaf) used to sit under the platform. Only the cut component's own
    # children get an alias to the platform; the leaf's old URN is its parent's alias
    # inherited (pulumi/pulumi pkg/resource/deploy/step_generator.go, generateAliases:
    # "multiply out any aliases our parent had"), not the platform's type chain plus its own.
    (tmp_path / "__main__.py").write_text(NESTED_MOVE)
    run = run_program({}, stack="s", project_dir=tmp_path, project="p")
    aliases = {r.name: r.aliases for r in run.resources}
    assert aliases["p-cut"] == ()
    assert aliases["p-inner"] == ("urn:pulumi:s::p::t:m:Platform$t:m:Inner::p-inner",)
    assert aliases["p-inner-leaf"] == (
        "urn:pulumi:s::p::t:m:Platform$t:m:Inner$t:m:Leaf::p-inner-leaf",
    )
