"""namespaceMode on GKE: the same namespace handling as on OpenShift (tests/test_openshift.py)."""

from __future__ import annotations

from tests.conftest import run_stack


def namespaces(stack: str, *overrides: str) -> list[dict[str, object]]:
    run = run_stack(stack, *overrides)
    return [
        {"name": r.inputs["metadata"]["name"], **r.options}
        for r in run.resources
        if r.type == "kubernetes:core/v1:Namespace"
    ]


def test_gke_namespace_is_created_and_retained_unless_opted_out() -> None:
    (created,) = namespaces("gcp-a3")
    assert created["name"] == "training" and created["retainOnDelete"] is True
    assert created["provider"]  # the new cluster's provider, not the ambient kubeconfig
    (opted_out,) = namespaces("gcp-a3", "storage.retainOnDelete=false")
    assert opted_out["retainOnDelete"] is False


def test_gke_namespace_can_be_adopted_or_referenced() -> None:
    (adopted,) = namespaces("gcp-a3", "namespaceMode=adopt")
    assert adopted["import"] == "training" and adopted["retainOnDelete"] is True
    assert namespaces("gcp-a3", "namespaceMode=reference") == []


def test_an_adopted_namespace_leaves_what_the_platform_writes_alone() -> None:
    """OpenShift and the API server write labels, annotations and the finalizer into every
    namespace; an import takes them as inputs, so they are ignored, and nothing else is."""
    for stack in ("gcp-a3", "barcelona"):
        (adopted,) = namespaces(stack, "namespaceMode=adopt")
        assert adopted["ignoreChanges"] == ["metadata.labels", "metadata.annotations", "spec"]
    (created,) = namespaces("gcp-a3")
    assert created["ignoreChanges"] == []
