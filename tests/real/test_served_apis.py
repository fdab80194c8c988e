"""A JobSet stack on the cluster's own Kueue and JobSet (workload.controllers.install false, the
OpenShift default) through the real engine: `pulumi preview` already fails, and the cluster
gets nothing of the stack, where the cluster has no Kueue, where its Kueue serves an older API
than the stack writes, or where the LocalQueue a stack references does not exist; with what it
needs in place the same preview passes (issue #19: "a check of the served API versions").

Kueue and JobSet are installed here as their CRDs only (the charts' own, as the tier renders
them): a preview reads them and writes nothing, so no manager needs to run.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpu_cluster.config.derived import queue_name
from gpu_cluster.facts.kueue import KUEUE_API, KUEUE_CRD
from tests.real.cluster_state import provision, stack_engine
from tests.real.conftest import Cluster
from tests.real.test_engine import JOB_SET_STACK
from tools.realtier.charts import chart_crds
from tools.realtier.kube import Object, install_crd_objects, wait_for_openapi_v2
from tools.realtier.stacks import render

pytestmark = pytest.mark.real

STACK = "nerc-production"
CREATES_ITS_QUEUE = (*JOB_SET_STACK, "namespaceMode=create")


def as_kueue_before_v1beta2(crd: Object) -> Object:
    """`crd` as a Kueue release before 0.15 served it: v1beta1 only (no conversion webhook)."""
    older = copy.deepcopy(crd)
    for version in older["spec"]["versions"]:
        version["served"] = version["storage"] = version["name"] == "v1beta1"
    older["spec"].pop("conversion", None)
    return older


def test_preview_stops_where_the_cluster_lacks_kueue_or_serves_an_older_api(
    cluster: Cluster, tmp_path: Path
) -> None:
    kube, stack_render = cluster.kube, render(STACK, CREATES_ITS_QUEUE)
    provision(kube, stack_render)
    engine = stack_engine(cluster, STACK, tmp_path)

    missing = engine.preview(*CREATES_ITS_QUEUE, check=False)
    assert missing.error is not None
    # The provider's words for a definition it could not read.
    assert f"'{KUEUE_CRD}' does not exist" in missing.error, missing.error[-3000:]

    crds = chart_crds(cluster.tools)
    older_kueue = [
        as_kueue_before_v1beta2(c) if c["metadata"]["name"] == KUEUE_CRD else c for c in crds
    ]
    install_crd_objects(kube, older_kueue)
    wait_for_openapi_v2(kube)  # installed after the engine started (stack_engine waits so)
    older = engine.preview(*CREATES_ITS_QUEUE, check=False)
    assert older.error is not None
    assert (
        "gpu-cluster:workload.controllers.install is false (the stack uses the Kueue and JobSet "
        f"the cluster runs), but the cluster's {KUEUE_CRD} serves v1beta1, not v1beta2"
    ) in older.error, older.error[-3000:]
    assert not kube.exists("v1", "Namespace", stack_render.settings.namespace)


def test_preview_stops_where_the_queue_a_stack_references_does_not_exist(
    cluster: Cluster, tmp_path: Path
) -> None:
    kube = cluster.kube
    edit = (*CREATES_ITS_QUEUE, "workload.queue.mode=reference")
    stack_render = render(STACK, edit)
    s = stack_render.settings
    provision(kube, stack_render)
    install_crd_objects(kube, chart_crds(cluster.tools))
    engine = stack_engine(cluster, STACK, tmp_path)

    absent = engine.preview(*edit, check=False)
    assert absent.error is not None
    assert f"'{s.namespace}/{queue_name(s)}' does not exist" in absent.error, absent.error[-3000:]

    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": s.namespace}})
    local_queue = {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": queue_name(s), "namespace": s.namespace},
        "spec": {"clusterQueue": "team"},
    }
    kube.create(local_queue)
    engine.preview(*edit)
