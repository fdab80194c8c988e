"""Stacks through the real Pulumi engine (tools/realtier/engine.py): the built CLI and
Kubernetes provider plugin run `pulumi up`, `preview` and `destroy` of the project's program
against the tier's API server, as a platform team runs them.

Barcelona as it ships: the cluster has what the stack references (its namespace and four NADs),
the fake GPU hosts and a volume for each claim. `pulumi up` registers exactly the resources the
offline render records (same URNs, parents and dependencies), exports its outputs, and returns
once the provider has
awaited them (the StatefulSet and the pre-pull DaemonSet rolled out on the hosts); a second
preview changes nothing; `pulumi destroy` is refused while the claims are protected, and
`--exclude-protected` removes everything else and keeps the claims bound.

A stack deployed by the release before the components were cut (ef30eb1, whose URNs
tests/fixtures/urns_before_issue15.json records) upgrades to this checkout through the real
engine: its aliases are accepted, nothing is deleted, only the scripts' ConfigMap (new scripts)
is replaced, and after `pulumi up` every claim is the same object (same UID).

The edit matrix on the engine: every OpenShift edit of tests/test_edit_matrix.py previewed by
the real engine on the deployed stack, its steps (create, update, replace, delete per resource)
equal to what the offline plan says, and an edit that would replace or delete a protected claim
refused at preview.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpu_cluster.components.workload.kind import JOB_SET_TYPE, STATEFUL_SET_TYPE
from gpu_cluster.facts.kueue import JOBSET_API, KUEUE_API
from gpu_cluster.offline.replacements import destructive
from gpu_cluster.plan.run_template import (
    JOB_SET_KEY,
    PARAMS_KEY,
    RunParams,
    RunRequest,
    fill,
    template_name,
)
from gpu_cluster.plan.security import OWNER_ANNOTATION
from tests.conftest import BARCELONA_CREATES_NADS, ROOT, plan_from, plan_of
from tests.real.cluster_state import (
    claim_phase,
    engine_for,
    exists,
    pods_of,
    provision,
    stack_engine,
    statefulset_settled,
)
from tests.real.conftest import Cluster, on_one_worker
from tests.real.queue_state import pods_of_an_admitted_run
from tests.test_edit_matrix import FROM_DEPLOYED, MATRIX, NAMESPACE
from tools.realtier.build import Tools
from tools.realtier.charts import chart_crds
from tools.realtier.controlplane import ControlPlane
from tools.realtier.engine import Engine, Outcome
from tools.realtier.kube import Kube, install_crd_objects, install_crds
from tools.realtier.stacks import render, volumes_for

pytestmark = pytest.mark.real

STACK = "barcelona"
# What the engine registers itself: the stack and the default provider (the mock records neither).
ENGINE_OWN = ("pulumi:pulumi:Stack", "pulumi:providers:")


def test_barcelona_up_preview_and_destroy_through_the_real_engine(
    cluster: Cluster, tmp_path: Path
) -> None:
    kube, stack_render = cluster.kube, render(STACK)
    engine = engine_for(cluster, stack_render, tmp_path)

    up = engine.up()
    program_urns = {s.urn for s in up.ops("create") if not s.type.startswith(ENGINE_OWN)}
    assert program_urns == {r.urn for r in stack_render.run.resources}
    assert up.outputs == stack_render.run.outputs
    # The graph `pulumi up` waits by, as the engine stored it, is the one the offline render
    # records (tests/test_dependency_graph.py reads that one).
    stored = {r["urn"]: r for r in engine.export()["resources"]}
    for recorded in stack_render.run.resources:
        state = stored[recorded.urn]
        assert state.get("parent", "") == recorded.parent, recorded.urn
        assert sorted(state.get("dependencies", [])) == recorded.options["dependsOn"], recorded.urn
    (sts,) = stack_render.of_kind("StatefulSet")
    meta = sts["metadata"]
    settled = kube.get("apps/v1", "StatefulSet", meta["name"], meta["namespace"])
    assert settled["status"].get("readyReplicas") == stack_render.settings.nodes
    placed = [p["spec"]["nodeName"] for p in pods_of(kube, settled)]
    assert len(set(placed)) == len(placed) == stack_render.settings.nodes

    again = engine.preview()
    changed = [(s.op, s.urn, s.diffs) for s in again.steps if s.op != "same"]
    assert not changed

    refused = engine.destroy(check=False)
    assert refused.error is not None and "protected" in refused.error
    engine.destroy(exclude_protected=True)
    claims = stack_render.of_kind("PersistentVolumeClaim")
    assert claims and all(claim_phase(kube, c) == "Bound" for c in claims)
    owned = [o for o in stack_render.objects() if o["kind"] != "PersistentVolumeClaim"]
    assert [o["metadata"]["name"] for o in owned if exists(kube, o)] == []


def claim_uids(kube: Kube, namespace: str) -> dict[str, str]:
    claims = kube.list("v1", "PersistentVolumeClaim", namespace)
    return {c["metadata"]["name"]: c["metadata"]["uid"] for c in claims}


# The commit tests/fixtures/urns_before_issue15.json was recorded from (tests/test_urns.py).
BEFORE_THE_CUT = "ef30eb1"
# A replacement's three events (pulumi/pulumi pkg/resource/deploy/step.go: ReplaceStep and the
# create and delete around it) are one "replace" in the offline plan.
REPLACING = {"create-replacement": "replace", "delete-replaced": "replace"}
# What the engine does to a resource that is removed or rebuilt.
DESTRUCTIVE_OPS = ("delete", "replace", *REPLACING)


@pytest.mark.parametrize("stack", ["barcelona", "nerc-production"])
def test_a_stack_deployed_before_the_cut_upgrades_replacing_no_object_that_holds_data(
    cluster: Cluster, tmp_path: Path, stack: str
) -> None:
    released = tmp_path / BEFORE_THE_CUT
    released.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", BEFORE_THE_CUT], capture_output=True, check=True
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(released, filter="data")
    stack_render = render(stack)
    engine = engine_for(cluster, stack_render, tmp_path, program_dir=released)
    engine.up()
    claims = claim_uids(cluster.kube, stack_render.settings.namespace)
    assert claims

    engine.use_program(ROOT)
    upgrade = engine.preview()
    rebuilt = {(s.type, s.name) for s in upgrade.steps if s.op in DESTRUCTIVE_OPS}
    assert rebuilt == {("kubernetes:core/v1:ConfigMap", "gpu-cluster-workload-scripts")}
    engine.up()
    assert claim_uids(cluster.kube, stack_render.settings.namespace) == claims


OPENSHIFT_STACKS = ("barcelona", "nerc-production")
# Edits the tier's provider (4.25.0, build.py) previews otherwise than the >=4.29 the program
# requires. A replaced object of a fixed name is deleted before it is created again, so its
# preview is a dry-run create while the old one still exists: 4.25 sends it as a server-side
# apply of that name, an update the API server refuses for a StatefulSet's volumeClaimTemplates
# (422, not the immutable-field error 4.25 retries under another name), and the preview fails
# there; from 4.29 it is a plain create, whose AlreadyExists the provider takes as "cannot
# preview" (pulumi-kubernetes provider/pkg/provider/provider.go Create at 94977969), and the
# preview goes on to the protected claims. Each such edit -> what its 4.25 preview fails with.
PROVIDER_4_25_PREVIEWS: dict[tuple[str, tuple[str, ...]], str] = {
    ("nerc-production", ("storage.mode=per-pod",)): (
        "updates to statefulset spec for fields other than"
    ),
}
OPENSHIFT_EDITS = [(stack, edit) for stack, edit in MATRIX if stack in OPENSHIFT_STACKS]


def engine_changes(outcome: Outcome) -> set[tuple[str, str, str]]:
    return {
        (s.type, s.name, REPLACING.get(s.op, s.op))
        for s in outcome.steps
        if s.op not in ("same", "read")
    }


# Edits of barcelona deployed with another namespace mode (tests/test_edit_matrix.py
# FROM_DEPLOYED): the namespace transitions, where the claims' data is at stake.
NAMESPACE_EDITS = [(d, e) for s, d, e in FROM_DEPLOYED if s == STACK]


@pytest.mark.parametrize(
    ("deployed", "edit"),
    NAMESPACE_EDITS,
    ids=[f"{','.join(d)} -> {','.join(e)}" for d, e in NAMESPACE_EDITS],
)
def test_the_engine_takes_a_namespace_edit_as_the_offline_plan_says(
    cluster: Cluster, tmp_path: Path, deployed: tuple[str, ...], edit: tuple[str, ...]
) -> None:
    """Deployed with `deployed`, the edit previews as the offline plan says (refused where it
    would delete a protected namespace); applied, what the plan retains stays in the cluster
    with the claims in it. The stack creates its NADs here: ones it references could not exist
    before a namespace it creates (on a cluster the SR-IOV operator would write them then)."""
    deployed = (*BARCELONA_CREATES_NADS, *deployed)
    stack_render = render(STACK, deployed)
    engine = engine_for(cluster, stack_render, tmp_path)
    engine.up(*deployed)
    planned = plan_from(STACK, deployed, edit)
    refused = [s for s in destructive(planned) if s.protected]
    preview = engine.preview(*edit, check=not refused)
    if refused:
        assert preview.error is not None and "protect" in preview.error
        return
    assert engine_changes(preview) == {(s.type, s.name, s.op) for s in planned}
    engine.up(*edit)
    namespace = stack_render.settings.namespace
    assert [s.retained for s in planned if s.type == NAMESPACE] == [True]
    assert cluster.kube.exists("v1", "Namespace", namespace)
    claims = stack_render.of_kind("PersistentVolumeClaim")
    assert claims and all(claim_phase(cluster.kube, c) == "Bound" for c in claims)


@pytest.fixture(scope="module")
def deployed(
    tools: Tools, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], Engine]]:
    """Each stack's engine once its stack file is up, on a control plane of its own for the
    module (an edit is only previewed, so the state stays as deployed), whose cluster has Kueue's
    and JobSet's CRDs (an OpenShift cluster with Red Hat's builds: a JobSet edit reads them)."""
    engines: dict[str, Engine] = {}
    failed: dict[str, str] = {}
    with contextlib.ExitStack() as planes:

        def deploy(stack: str) -> Engine:
            if stack in failed:  # each later edit would preview against a half-made stack
                pytest.fail(f"deploying {stack} failed in an earlier test: {failed[stack]}")
            if stack not in engines:
                workdir = tmp_path_factory.mktemp(stack)
                plane = planes.enter_context(ControlPlane(tools, workdir=workdir / "plane"))
                kube = Kube(plane.kubeconfig)
                install_crds(kube, tools.crds)
                install_crd_objects(kube, chart_crds(tools))
                engine = engine_for(Cluster(plane, kube, tools), render(stack), workdir)
                try:
                    engine.up()
                except Exception as error:
                    failed[stack] = str(error)[-2000:]
                    raise
                engines[stack] = engine
            return engines[stack]

        yield deploy


@on_one_worker("engine-previews")  # `deployed` deploys each stack once
@pytest.mark.parametrize(
    ("stack", "edit"), OPENSHIFT_EDITS, ids=[" ".join((s, *e))[:60] for s, e in OPENSHIFT_EDITS]
)
def test_the_engine_previews_each_edit_as_the_offline_plan_says(
    deployed: Callable[[str], Engine], stack: str, edit: tuple[str, ...]
) -> None:
    planned = plan_of(stack, *edit)
    refused = [s for s in destructive(planned) if s.protected]
    provider_4_25 = PROVIDER_4_25_PREVIEWS.get((stack, edit))
    preview = deployed(stack).preview(*edit, check=not (refused or provider_4_25))
    if provider_4_25:
        assert preview.error is not None and provider_4_25 in preview.error
        return
    if refused:
        assert preview.error is not None and "protect" in preview.error
        assert any(s.name in preview.error for s in refused), preview.error
        return
    assert engine_changes(preview) == {(s.type, s.name, s.op) for s in planned}


def test_a_secret_reaches_the_cluster_and_stays_ciphertext_in_the_state(
    cluster: Cluster, tmp_path: Path
) -> None:
    """nerc-production with a token in `secretEnv`, set as `pulumi config set --secret` sets it:
    `pulumi up` puts it in the stack's Secret; the stack file, the state file and the exported
    state hold it only as ciphertext."""
    token = "hf_realtier" + "7" * 24  # a value no other part of the stack has
    stack_render = render("nerc-production")
    engine = engine_for(cluster, stack_render, tmp_path)
    engine.up(secrets={"secretEnv.HF_TOKEN": token})

    namespace = stack_render.settings.namespace
    carried = [
        s["metadata"]["name"]
        for s in cluster.kube.list("v1", "Secret", namespace)
        if base64.b64decode((s.get("data") or {}).get("HF_TOKEN", "")) == token.encode()
    ]
    assert carried, "no Secret in the namespace carries the token"

    state = json.dumps(engine.export())
    assert token not in state and base64.b64encode(token.encode()).decode() not in state
    assert '"ciphertext": "v1:' in state, "no secret in the state"
    stored = [p for p in (tmp_path / "engine" / "state").rglob("*.json") if p.is_file()]
    assert stored and not [p for p in stored if token in p.read_text(errors="replace")]
    stack_file = engine.stack_file.read_text()
    assert token not in stack_file and "secure: v1:" in stack_file


JOB_SET_STACK = ("workload.kind=jobset", "workload.command[0]=/workspace/train.py")
NEXT_IMAGE = "image=nvcr.io/nvidia/pytorch:25.02-py3"


def test_a_jobset_stack_runs_is_replaced_on_an_edit_and_switches_kind_keeping_the_claims(
    openshift_queued_cluster: Cluster, tmp_path: Path
) -> None:
    """nerc-production as a JobSet stack that creates its namespace, on Kueue and JobSet set up
    as on OpenShift: `pulumi up` through the real engine creates the queue and the run, which
    Kueue admits and JobSet starts; a second preview changes nothing. An image edit replaces the
    JobSet (its spec is immutable: deleted, then created) and nothing else; the new run is
    admitted and runs the new image on the same claims. With the run still going, the stack
    goes back to a StatefulSet, and then on to a JobSet again: each time the old object is
    deleted before the new one is created (they alias each other), so the new pods find the
    GPUs free; the claims stay."""
    cluster, kube = openshift_queued_cluster, openshift_queued_cluster.kube
    overrides = (*JOB_SET_STACK, "namespaceMode=create")
    stack_render = render("nerc-production", overrides)
    s = stack_render.settings
    provision(kube, stack_render)
    engine = stack_engine(cluster, "nerc-production", tmp_path)
    engine.up(*overrides)
    first = {p["metadata"]["uid"] for p in pods_of_an_admitted_run(cluster, stack_render)}
    claims = claim_uids(kube, s.namespace)
    assert claims
    # The run template as `pulumi up` wrote it (the JobSet spec it sent) makes another
    # run that the API server and JobSet's and Kueue's webhooks accept (gpu-cluster run submit).
    data = kube.get("v1", "ConfigMap", template_name(s.name), s.namespace)["data"]
    template, params = json.loads(data[JOB_SET_KEY]), RunParams.from_json(data[PARAMS_KEY])
    another = fill(template, params, RunRequest("another", nodes=1), s.namespace)
    assert kube.create(another, dry_run=True)["metadata"]["name"] == "another"
    # Nothing but the reads of Kueue's and JobSet's CRDs, done on every preview.
    assert engine_changes(engine.preview()) == set()

    edit = engine.preview(NEXT_IMAGE)
    rebuilt = {(st.type, st.name) for st in edit.steps if st.op in DESTRUCTIVE_OPS}
    # And the run template, which copies the JobSet: the provider replaces a ConfigMap whose
    # data changes.
    templates = [
        r
        for r in stack_render.run.of_type("kubernetes:core/v1:ConfigMap")
        if r.name.endswith("-run-template")
    ]
    assert len(templates) == 1
    run_objects = [*stack_render.run.of_type(JOB_SET_TYPE), *templates]
    assert rebuilt == {(r.type, r.name) for r in run_objects}
    engine.up(NEXT_IMAGE)
    pods = pods_of_an_admitted_run(cluster, stack_render)
    assert first.isdisjoint(p["metadata"]["uid"] for p in pods)
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} >= {NEXT_IMAGE.split("=")[1]}
    assert claim_uids(kube, s.namespace) == claims

    # Back to a StatefulSet while the run holds every GPU (a short wait: were the run's pods
    # still there, the StatefulSet's would never start).
    statefulset = engine.up("!workload", "workload.startTimeoutMinutes=3")
    assert switched(statefulset, JOB_SET_TYPE, STATEFUL_SET_TYPE)
    (sts,) = render("nerc-production", ("namespaceMode=create",)).of_kind("StatefulSet")
    assert statefulset_settled(kube, sts) is not None, "pulumi up returned before the rollout"
    assert kube.list(JOBSET_API, "JobSet", s.namespace) == []
    assert claim_uids(kube, s.namespace) == claims
    # And to a JobSet again, from the StatefulSet's running pods.
    jobset = engine.up("!workload.startTimeoutMinutes", *JOB_SET_STACK)
    assert switched(jobset, STATEFUL_SET_TYPE, JOB_SET_TYPE)
    assert pods_of_an_admitted_run(cluster, stack_render)
    assert kube.list("apps/v1", "StatefulSet", s.namespace) == []
    assert claim_uids(kube, s.namespace) == claims


PLACED_BY_RACK = (
    *JOB_SET_STACK,
    "namespaceMode=create",
    "workload.queue.topologyLevels[0]=example.com/rack",
)
PLACED_BY_BLOCK = ("workload.queue.topologyLevels[0]=example.com/block",)


def test_new_placement_levels_move_the_queue_to_a_new_topology_and_flavor(
    openshift_queued_cluster: Cluster, tmp_path: Path
) -> None:
    """nerc-production as a JobSet stack placed by rack, with Kueue running. A Topology's levels
    and a flavor's topologyName are immutable, and Kueue holds on to either while it is in use
    (its resource-in-use finalizer): other levels make a new Topology and flavor, the
    ClusterQueue moves to them, and the old ones go, as the offline plan says; `pulumi up`
    takes it. (Updated in place, the API server refused the edit, "field is immutable"; deleted
    and made again under its name, the Topology stayed, held by the flavor naming it.)"""
    cluster, kube = openshift_queued_cluster, openshift_queued_cluster.kube
    racks = render("nerc-production", PLACED_BY_RACK)
    provision(kube, racks)
    engine = stack_engine(cluster, "nerc-production", tmp_path)
    engine.up(*PLACED_BY_RACK)
    planned = plan_from("nerc-production", PLACED_BY_RACK, PLACED_BY_BLOCK)
    assert engine_changes(engine.preview(*PLACED_BY_BLOCK)) == {
        (s.type, s.name, s.op) for s in planned
    }
    engine.up(*PLACED_BY_BLOCK)
    blocks = render("nerc-production", (*PLACED_BY_RACK, *PLACED_BY_BLOCK))
    for kind in ("Topology", "ResourceFlavor"):
        (old,), (new,) = racks.of_kind(kind), blocks.of_kind(kind)
        live = kube.get(KUEUE_API, kind, new["metadata"]["name"])
        assert live["spec"] == new["spec"]
        assert not kube.exists(KUEUE_API, kind, old["metadata"]["name"])


def switched(outcome: Outcome, old_type: str, new_type: str) -> bool:
    """Whether the engine replaced the workload's `old_type` object by a `new_type` one, the old
    deleted before the new was created, and changed no other workload object."""
    (deleted,) = [st for st in outcome.steps if st.op == "delete-replaced" and st.type == old_type]
    (created,) = [
        st for st in outcome.steps if st.op == "create-replacement" and st.type == new_type
    ]
    others = [st for st in outcome.ops("create", "delete") if st.type in (old_type, new_type)]
    return deleted.finished is not None and deleted.finished < created.started and not others


MEMLOCK_BY_MACHINE_CONFIG = "rdma.memlock=machineconfig"


def test_a_second_stack_adopts_the_memlock_machine_config_its_creator_left(
    cluster: Cluster, tmp_path: Path
) -> None:
    """barcelona creates the pool's memlock MachineConfig; `pulumi destroy` leaves it (shared by
    every stack on the pool); another stack of the same settings then adopts it
    (`rdma.machineConfig: adopt`): imported, and its owner annotation, a field the first stack's
    apply owns, taken over."""
    stack_render = render(STACK, (MEMLOCK_BY_MACHINE_CONFIG,))
    creator = engine_for(cluster, stack_render, tmp_path / "creator")
    creator.up(MEMLOCK_BY_MACHINE_CONFIG)
    creator.destroy(exclude_protected=True)
    (config,) = stack_render.of_kind("MachineConfig")
    name = config["metadata"]["name"]
    assert cluster.kube.exists(config["apiVersion"], "MachineConfig", name)

    # Its own workload name: the first stack's claims stay, and a plain create would refuse them.
    adopting = (MEMLOCK_BY_MACHINE_CONFIG, "rdma.machineConfig=adopt", "name=second-run")
    claims = render(STACK, adopting).of_kind("PersistentVolumeClaim")
    cluster.kube.create_all(volumes_for(claims))
    second = stack_engine(cluster, "second", tmp_path / "second", stack_file_of=STACK)
    up = second.up(*adopting)
    assert [s.name for s in up.ops("import")] == ["gpu-cluster-memlock"]
    live = cluster.kube.get(config["apiVersion"], "MachineConfig", name)
    assert live["metadata"]["annotations"][OWNER_ANNOTATION] == "gpu-cluster/second"
