"""gpu_cluster.offline.replacements reads the providers' replacement rules the way the engine
applies them: force-new fields, ignoreChanges, replaceOnChanges, conditional rules and protect."""

from __future__ import annotations

from typing import Any

from gpu_cluster.offline.replacements import Step, index, plan

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
STS = "kubernetes:apps/v1:StatefulSet"
SUBNET = "gcp:compute/subnetwork:Subnetwork"


def row(type_: str, name: str, inputs: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {"type": type_, "name": name, "inputs": inputs, "options": options}


def one_step(old: dict[str, Any], new: dict[str, Any]) -> Step | None:
    steps = plan(index([old]), index([new]))
    assert len(steps) <= 1
    return steps[0] if steps else None


def claim(size: str, cls: str, name: str = "c") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"storageClassName": cls, "resources": {"requests": {"storage": size}}},
    }


def test_claim_size_updates_in_place_class_and_name_replace() -> None:
    base = row(PVC, "c", claim("1Gi", "a"), protect=True)
    assert one_step(base, row(PVC, "c", claim("2Gi", "a"), protect=True)) == Step(
        PVC, "c", "update", protected=True
    )
    replaced = one_step(base, row(PVC, "c", claim("1Gi", "b"), protect=True))
    assert replaced == Step(PVC, "c", "replace", ("spec.storageClassName",), True)
    renamed = one_step(base, row(PVC, "c", claim("1Gi", "a", "d"), protect=False))
    # Unprotecting and replacing may happen in one update; deleting needs the unprotect first.
    assert renamed == Step(PVC, "c", "replace", ("metadata.name",), False)
    assert plan(index([base]), {}) == [Step(PVC, "c", "delete", protected=True)]


def test_ignore_changes_with_wildcards_keeps_the_old_template() -> None:
    def sts(size: str, volumes: list[str]) -> dict[str, Any]:
        templates = [{"metadata": {"name": v}, **claim(size, "a", v)} for v in volumes]
        return {"metadata": {"name": "s"}, "spec": {"volumeClaimTemplates": templates}}

    ignore = ["spec.volumeClaimTemplates[*].spec.resources"]
    old = row(STS, "s", sts("1Gi", ["w"]), ignoreChanges=ignore)
    assert one_step(old, row(STS, "s", sts("9Gi", ["w"]), ignoreChanges=ignore)) is None
    added = one_step(old, row(STS, "s", sts("1Gi", ["w", "d"]), ignoreChanges=ignore))
    assert added is not None and added.fields == ("spec.volumeClaimTemplates",)


def test_subnet_range_may_grow_but_not_move() -> None:
    def subnet(cidr: str) -> dict[str, Any]:
        return row(SUBNET, "n", {"name": "n", "ipCidrRange": cidr})

    grown = one_step(subnet("10.0.0.0/24"), subnet("10.0.0.0/20"))
    assert grown is not None and grown.op == "update"
    moved = one_step(subnet("10.0.0.0/24"), subnet("10.1.0.0/24"))
    assert moved is not None and moved.fields == ("ipCidrRange",)


def test_replace_on_changes_option_adds_fields() -> None:
    old = row("kubernetes:core/v1:Service", "s", {"spec": {"type": "A"}})
    new = row(
        "kubernetes:core/v1:Service", "s", {"spec": {"type": "B"}}, replaceOnChanges=["spec.type"]
    )
    step = one_step(old, new)
    assert step is not None and step.fields == ("spec.type",)


NAMESPACE = "kubernetes:core/v1:Namespace"
URN = "urn:pulumi:s::p::gpu-cluster:{}Platform$gpu-cluster:namespace:TrainingNamespace${}::ns"


def test_a_resource_under_a_new_urn_is_deleted_and_created_unless_aliased() -> None:
    """A platform change keeps the type and name but not the parent's type: a new URN."""
    ns = {"metadata": {"name": "training"}}
    old = {
        **row(NAMESPACE, "ns", ns, protect=True),
        "urn": URN.format("openshift:OpenShift", NAMESPACE),
    }
    moved = {**row(NAMESPACE, "ns", ns), "urn": URN.format("gke:Gke", NAMESPACE)}
    assert plan(index([old]), index([moved])) == [
        Step(NAMESPACE, "ns", "delete", protected=True),
        Step(NAMESPACE, "ns", "create"),
    ]
    aliased = {**moved, "aliases": [old["urn"]]}
    assert plan(index([old]), index([aliased])) == []


def test_adopting_another_object_replaces_without_asking_protect() -> None:
    """An import of another ID replaces the resource, and the engine deletes the old one
    without its protect check; an import of the object already in the state is no import."""
    created = row(NAMESPACE, "ns", {"metadata": {"name": "training"}}, protect=True)
    same = row(NAMESPACE, "ns", {"metadata": {"name": "training"}}, **{"import": "training"})
    assert one_step(created, same) is None
    other = row(NAMESPACE, "ns", {"metadata": {"name": "other"}}, **{"import": "other"})
    assert one_step(created, other) == Step(NAMESPACE, "ns", "replace", ("metadata.name",))
    adopted = row(PVC, "c", claim("1Gi", "a"), **{"import": "ns/c"})
    assert one_step(row(PVC, "c", claim("1Gi", "a"), protect=True), adopted) is None
    assert one_step(adopted, row(PVC, "c", claim("1Gi", "a"), **{"import": "ns/d"})) == Step(
        PVC, "c", "replace", ("import",)
    )


def test_a_read_is_no_step_whether_it_comes_or_goes() -> None:
    crd = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
    read = row(crd, "kueue", {}, read="clusterqueues.kueue.x-k8s.io")
    owned = row(crd, "kueue", {})
    assert plan({}, index([read])) == plan(index([read]), {}) == []
    # The same name written instead of read is a resource the stack owns.
    assert plan({}, index([owned])) == [Step(crd, "kueue", "create")]


def test_a_resource_that_changes_type_under_an_alias_is_replaced_or_updated() -> None:
    old = {**row(STS, "w", {"kind": "StatefulSet", "spec": {"a": 1}}), "urn": "urn:old"}
    replaced = {
        **row("kubernetes:x/v1:Other", "w", {"kind": "Other", "spec": {"a": 1}}),
        "urn": "urn:new",
        "aliases": ["urn:old"],
        "options": {"replaceOnChanges": ["kind"]},
    }
    assert plan(index([old]), index([replaced])) == [
        Step("kubernetes:apps/v1:StatefulSet", "w", "replace", ("kind",)),
        Step("kubernetes:x/v1:Other", "w", "replace", ("kind",)),
    ]
    updated = {**replaced, "options": {}}
    assert plan(index([old]), index([updated])) == [Step("kubernetes:x/v1:Other", "w", "update")]
    # Without the alias: a delete beside a create.
    unrelated = {**updated, "aliases": []}
    assert [s.op for s in plan(index([old]), index([unrelated]))] == ["delete", "create"]
