"""A stack through the real Pulumi engine (tools/realtier/engine.py): the built CLI and
Kubernetes provider plugin run `pulumi up`, `preview` and `destroy` of the project's program
against the tier's API server, as a platform team runs them.

Barcelona as it ships: the cluster has what the stack references (its namespace and four NADs),
the fake GPU hosts and a volume for each claim. `pulumi up` registers exactly the resources the
offline render records (same URNs) and returns once the provider has awaited them (the
StatefulSet and the pre-pull DaemonSet rolled out on the hosts); a second preview changes
nothing; `pulumi destroy` is refused while the claims are protected, and
`--exclude-protected` removes everything else and keeps the claims bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import stack_context
from tests.real.cluster_state import claim_phase, pods_of, provision, referenced_objects
from tests.real.conftest import Cluster
from tools.realtier.engine import Engine, stack_kubeconfig
from tools.realtier.kube import Kube
from tools.realtier.stacks import Object, StackRender, render

pytestmark = pytest.mark.real

STACK = "barcelona"
# What the engine registers itself: the stack and the default provider (the mock records neither).
ENGINE_OWN = ("pulumi:pulumi:Stack", "pulumi:providers:")


def engine_for(cluster: Cluster, stack_render: StackRender, tmp_path: Path) -> Engine:
    """The stack's engine, on a cluster that has the stack's hosts, volumes and what it
    references."""
    provision(cluster.kube, stack_render)
    cluster.kube.create_all(referenced_objects(stack_render))
    context = stack_context(stack_render.stack)
    kubeconfig = stack_kubeconfig(cluster.kubeconfig, context, tmp_path / "kubeconfig")
    return Engine(cluster.tools, tmp_path / "engine", stack_render.stack, kubeconfig)


def exists(kube: Kube, obj: Object) -> bool:
    meta = obj["metadata"]
    return kube.exists(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))


def test_barcelona_up_preview_and_destroy_through_the_real_engine(
    cluster: Cluster, tmp_path: Path
) -> None:
    kube, stack_render = cluster.kube, render(STACK)
    engine = engine_for(cluster, stack_render, tmp_path)

    up = engine.up()
    program_urns = {s.urn for s in up.ops("create") if not s.type.startswith(ENGINE_OWN)}
    assert program_urns == {r.urn for r in stack_render.run.resources}
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
