"""timelineCommand as a project's user on a shared cluster runs it: with the rights Kubernetes'
`view` role gives in the stack's namespace only (no nodes, no other namespace), on the real API
server with RBAC. The start is still shown; what those rights cannot read is '-' and said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import stack_context
from tests.real.cluster_state import bring_up, paste
from tests.real.conftest import Cluster
from tools.realtier.stacks import render

pytestmark = pytest.mark.real

USER = "project-user"
RBAC = "rbac.authorization.k8s.io"


def namespace_viewer(cluster: Cluster, namespace: str) -> str:
    """A token of a ServiceAccount bound to the built-in `view` ClusterRole in `namespace`."""
    kube = cluster.kube
    account = {"name": USER, "namespace": namespace}
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account})
    kube.create(
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{USER}-view", "namespace": namespace},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", **account}],
        }
    )
    return kube.service_account_token(USER, namespace)


@pytest.mark.parametrize("stack", ["barcelona", "gcp-a3"])
def test_a_namespace_user_sees_the_start_without_the_nodes(
    cluster: Cluster, stack: str, tmp_path: Path
) -> None:
    stack_render = render(stack)
    bring_up(cluster, stack_render, (), tmp_path)

    token = namespace_viewer(cluster, stack_render.settings.namespace)
    printed = paste(
        cluster,
        tmp_path,
        stack_context(stack),
        stack_render.run.outputs["timelineCommand"],
        user={"token": token},
    )
    at = {line[:14].strip(): line[14:36].strip() for line in printed.splitlines()[1:-2]}
    assert at["nodes ready"] == "-", printed
    for phase in ("submitted", "scheduled", "initialized", "started", "ready"):
        assert at[phase] != "-", printed
    # barcelona's image pre-pull is in the stack's namespace; GKE's agents are in kube-system.
    in_namespace = stack_render.settings.platform == "openshift"
    assert (at["agents ready"] != "-") == in_namespace, printed
    unreadable = "nodes" if in_namespace else "nodes, the node agents' pods in kube-system"
    assert printed.splitlines()[-1] == f"(not readable with your rights, so '-': {unreadable})"
