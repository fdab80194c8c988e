"""Migrating Barcelona from the seed system, on a real API server: what the seed left is
created first (tests/real/fixtures/barcelona_before.yaml, its pods running on the fake GPU
nodes), then the commands of docs/migration.md run literally, then `pulumi up` runs through the
real engine (tools/realtier/engine.py). For `reference`, `adopt` and `create` NADs alike the
stack comes up, what it adopts is imported as it is, and the seed's claims are untouched.

pulumi-kubernetes >= 4.29 (what the program requires) creates each new object with a plain
create, so an object the guide left behind fails with AlreadyExists; the tier's provider (4.25)
would take it over instead. So each object is also created as a plain create (a dry run) first,
and the failure without the guide is shown with such creates.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import BARCELONA_ADOPTS_NADS, BARCELONA_CREATES_NADS, ROOT
from tests.real.cluster_state import (
    barcelona_before,
    claim_phase,
    provision,
    stack_engine,
    statefulset_settled,
)
from tests.real.conftest import Cluster
from tools.realtier.kube import CreateError, Kube, describe, wait_for
from tools.realtier.stacks import StackRender, render, volumes_for

pytestmark = pytest.mark.real

# `oc delete` resource names the guide uses -> (apiVersion, kind).
OC_KINDS = {
    "statefulset": ("apps/v1", "StatefulSet"),
    "service": ("v1", "Service"),
    "network-attachment-definitions": ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"),
}
MODES = {
    "reference": (),
    "adopt": ("namespaceMode=adopt", *BARCELONA_ADOPTS_NADS),
    "create": BARCELONA_CREATES_NADS,
}


def guide_commands(overrides: tuple[str, ...]) -> list[list[str]]:
    """The `oc delete` commands of the guide's bash blocks that apply: `# Every migration`
    blocks always, `# Only for <key>: <value>` blocks when the override sets that value."""
    guide = (ROOT / "docs" / "migration.md").read_text(encoding="utf-8")
    chosen = {tuple(o.split("=", 1)) for o in overrides}
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", guide, flags=re.DOTALL):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        condition = re.match(r"# Only for ([\w.]+): (\w+)", lines[0])
        if not lines[0].startswith("# Every migration") and not (
            condition and condition.groups() in chosen
        ):
            continue
        commands += [shlex.split(line) for line in lines if line.startswith("oc delete")]
    return commands


def run_oc_delete(kube: Kube, argv: list[str]) -> None:
    """`oc delete KIND NAME... -n NS`: delete each (dependents in the background, as oc does)
    and wait until the object itself is gone, as oc does by default."""
    args = argv[2:]
    namespace = args[args.index("-n") + 1]
    del args[args.index("-n") : args.index("-n") + 2]
    api_version, kind = OC_KINDS[args[0]]
    for name in args[1:]:
        kube.delete(api_version, kind, name, namespace)
        wait_for(
            f"{kind} {name} deleted",
            functools.partial(gone, kube, api_version, kind, name, namespace),
        )


def gone(kube: Kube, api_version: str, kind: str, name: str, namespace: str) -> bool:
    return not kube.exists(api_version, kind, name, namespace)


def seed_running(cluster: Cluster, stack_render: StackRender) -> None:
    kube = cluster.kube
    provision(kube, stack_render)
    before = barcelona_before()
    kube.create_all(volumes_for([o for o in before if o["kind"] == "PersistentVolumeClaim"]))
    kube.create_all(before)
    (seed_sts,) = [o for o in before if o["kind"] == "StatefulSet"]
    wait_for(
        "the seed's StatefulSet ready",
        functools.partial(statefulset_settled, kube, seed_sts),
        explain=functools.partial(describe, kube, "nccl-test"),
    )


@pytest.mark.parametrize("mode", MODES)
def test_barcelona_migrates_by_the_guide(cluster: Cluster, mode: str, tmp_path: Path) -> None:
    kube, overrides = cluster.kube, MODES[mode]
    stack_render = render("barcelona", overrides)
    seed_running(cluster, stack_render)

    for command in guide_commands(overrides):
        run_oc_delete(kube, command)
    for obj in stack_render.objects():
        kube.create(obj, dry_run=True)
    up = stack_engine(cluster, "barcelona", tmp_path).up(*overrides)

    assert {s.name for s in up.ops("import")} == {r.name for r in stack_render.imported().values()}
    (sts,) = stack_render.of_kind("StatefulSet")
    assert statefulset_settled(kube, sts) is not None, "pulumi up returned before the rollout"
    for claim in stack_render.of_kind("PersistentVolumeClaim"):
        assert claim_phase(kube, claim) == "Bound"
    for seed_claim in (o for o in barcelona_before() if o["kind"] == "PersistentVolumeClaim"):
        assert claim_phase(kube, seed_claim) == "Bound", "the seed's data must stay"


def test_without_the_guide_the_seeds_headless_service_stops_the_create(cluster: Cluster) -> None:
    """The defect the guide's step fixes: the seed's headless Service has this stack's name."""
    stack_render = render("barcelona")
    seed_running(cluster, stack_render)
    run_oc_delete(cluster.kube, ["oc", "delete", "statefulset", "ml-dev-env", "-n", "nccl-test"])
    with pytest.raises(CreateError) as refused:
        cluster.kube.create_all(stack_render.objects())
    assert refused.value.status == 409 and "ml-dev-env-headless" in str(refused.value)
    assert "AlreadyExists" in refused.value.body
