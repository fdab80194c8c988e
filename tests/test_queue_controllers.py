"""`workload.controllers` in the render: a GKE JobSet stack installs JobSet, then Kueue, from
their upstream charts (helm.v4.Chart), each in its own namespace, and its queue and run wait
for them; elsewhere, or told not to, it installs nothing and reads first what it relies on.

The charts on the real managers: tests/real/test_jobset_stack.py (tools/realtier/charts.py
renders and runs the same charts); cluster-toolkit's install field by field:
tests/vendor/gke_gpudirect.yaml."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi_kubernetes.apiextensions.v1.outputs import (
    CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion,
)

from gpu_cluster.components.queue_controllers import QUEUE_CONTROLLERS_TYPE, _served
from gpu_cluster.facts.kueue import QUEUE_LABEL
from gpu_cluster.offline.engine import ProgramRun, RecordedResource
from gpu_cluster.offline.graph import Graph
from gpu_cluster.offline.render import resources_json
from gpu_cluster.plan.controllers import ServedApi
from tests.conftest import GKE_RWX, one, run_stack
from tests.edits import A4_STATEFULSET

CHART = "kubernetes:helm.sh/v4:Chart"
NAMESPACE = "kubernetes:core/v1:Namespace"
GKE_JOBSET = ("workload.kind=jobset", "workload.command[0]=/workspace/train.py", *GKE_RWX)
OPENSHIFT_JOBSET = GKE_JOBSET[:2]


def charts(run: ProgramRun) -> list[RecordedResource]:
    return run.of_type(CHART)


def by_urn(run: ProgramRun) -> dict[str, RecordedResource]:
    return {r.urn: r for r in run.resources}


def test_a_gke_jobset_stack_installs_jobset_then_kueue_from_their_charts() -> None:
    run = run_stack("gcp-a4", *GKE_JOBSET)
    jobset, kueue = charts(run)
    assert [dict(c.inputs) for c in (jobset, kueue)] == [
        {
            "chart": "oci://registry.k8s.io/jobset/charts/jobset",
            "version": "0.12.0",
            "name": "jobset",
            "namespace": "jobset-system",
        },
        {
            "chart": "oci://registry.k8s.io/kueue/charts/kueue",
            "version": "0.19.2",
            "name": "kueue",
            "namespace": "kueue-system",
        },
    ]
    resources = by_urn(run)
    for chart in (jobset, kueue):
        namespaces = [resources[u] for u in chart.options["dependsOn"] if NAMESPACE in u]
        assert [n.inputs["metadata"]["name"] for n in namespaces] == [chart.inputs["namespace"]]
        (namespace,) = namespaces
        labels = namespace.inputs["metadata"]["labels"]
        assert labels["app.kubernetes.io/component"] == "queue-controllers"
        # On the stack's own cluster, through its provider.
        assert chart.options["provider"] == namespace.options["provider"] != ""
    assert jobset.urn in kueue.options["dependsOn"]


def test_the_queue_and_the_run_wait_for_kueue() -> None:
    run = run_stack("gcp-a3", *GKE_JOBSET)
    (_, kueue) = charts(run)
    waiting = [
        r
        for r in run.kubernetes_objects()
        if r.inputs["apiVersion"].startswith("kueue.x-k8s.io/") and r.inputs["kind"] != "LocalQueue"
    ]
    assert {r.inputs["kind"] for r in waiting} >= {"ResourceFlavor", "ClusterQueue", "Topology"}
    for r in waiting:
        assert kueue.urn in r.options["dependsOn"], r.name
    (job_set,) = [r for r in run.kubernetes_objects() if r.inputs["kind"] == "JobSet"]
    assert kueue.urn in job_set.options["dependsOn"]


def test_a_config_edit_moves_a_controller_to_another_release() -> None:
    before = run_stack("gcp-a4", *GKE_JOBSET)
    after = run_stack("gcp-a4", *GKE_JOBSET, "workload.controllers.kueueVersion=0.18.3")

    def inputs(run: ProgramRun) -> dict[str, Any]:
        return {r.urn: r.inputs for r in run.resources}

    changed = {
        urn: (old, inputs(after)[urn])
        for urn, old in inputs(before).items()
        if inputs(after)[urn] != old
    }
    ((urn, (old, new)),) = changed.items()
    assert urn.endswith("::gpu-cluster-queue-controllers-kueue")
    assert (old["version"], new["version"]) == ("0.19.2", "0.18.3")


def test_nothing_is_installed_where_the_controllers_come_from_elsewhere() -> None:
    for stack, overrides in [
        ("gcp-a4", (*GKE_JOBSET, "workload.controllers.install=false")),
        ("nerc-production", OPENSHIFT_JOBSET),
        ("gcp-a4", A4_STATEFULSET),
    ]:
        run = run_stack(stack, *overrides)
        assert charts(run) == [], (stack, overrides)
        assert not any(r.type == QUEUE_CONTROLLERS_TYPE for r in run.resources)
        assert not [
            r
            for r in run.kubernetes_objects()
            if r.inputs["metadata"]["name"] in ("kueue-system", "jobset-system")
        ]


CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"


def reads(run: ProgramRun) -> dict[str, str]:
    """type -> the ID each read reads."""
    return {r.type: r.options["read"] for r in run.resources if "read" in r.options}


def test_a_stack_on_the_cluster_s_controllers_reads_their_definitions_before_it_writes() -> None:
    run = run_stack("nerc-production", *OPENSHIFT_JOBSET)
    read = [r for r in run.resources if "read" in r.options]
    assert sorted(r.options["read"] for r in read) == [
        "clusterqueues.kueue.x-k8s.io",
        "jobsets.jobset.x-k8s.io",
    ]
    assert {r.type for r in read} == {CRD}
    # Every Kueue and JobSet object it writes waits for both reads; the reads write nothing.
    queued = [
        r
        for r in run.kubernetes_objects()
        if r.inputs["apiVersion"].split("/")[0].endswith(("kueue.x-k8s.io", "jobset.x-k8s.io"))
    ]
    assert {r.inputs["kind"] for r in queued} >= {"ClusterQueue", "LocalQueue", "JobSet"}
    graph = Graph(json.loads(resources_json(run)))
    for r in queued:
        assert {x.urn for x in read} <= graph.waits_for(r.urn), r.name
    assert not [m for m in run.manifests() if m["kind"] == "CustomResourceDefinition"]


def test_a_stack_that_references_its_queue_reads_it_where_its_users_may() -> None:
    run = run_stack("nerc-production", *OPENSHIFT_JOBSET, "workload.queue.mode=reference")
    meta = one(run, "JobSet")["metadata"]
    assert reads(run) == {LOCAL_QUEUE: f"{meta['namespace']}/{meta['labels'][QUEUE_LABEL]}"}


def test_an_installing_stack_reads_nothing() -> None:
    assert reads(run_stack("gcp-a4", *GKE_JOBSET)) == {}
    assert reads(run_stack("nerc-production")) == {}


def _spec(versions: dict[str, bool]) -> CustomResourceDefinitionSpec:
    return CustomResourceDefinitionSpec(
        group="kueue.x-k8s.io",
        names=None,  # type: ignore[arg-type]
        scope="Cluster",
        versions=[
            CustomResourceDefinitionVersion(name=n, served=served, storage=False)
            for n, served in versions.items()
        ],
    )


def test_a_definition_that_does_not_serve_the_version_stops_the_program_naming_the_key() -> None:
    api = ServedApi("clusterqueues.kueue.x-k8s.io", "v1beta2")
    assert _served(api, _spec({"v1beta1": True, "v1beta2": True})) == "v1beta2"
    for versions in ({"v1beta1": True}, {"v1beta1": True, "v1beta2": False}):
        with pytest.raises(pulumi.RunError) as refused:
            _served(api, _spec(versions))
        said = str(refused.value)
        assert "gpu-cluster:workload.controllers.install" in said
        assert "clusterqueues.kueue.x-k8s.io serves v1beta1, not v1beta2" in said
