"""GKE's own workloads have somewhere to run: a pod like kube-dns (GKE's system Deployments
tolerate no taint and ask for no node) is placed by the real scheduler on the system pool, never
on the tainted GPU pool, on every GKE stack."""

from __future__ import annotations

import functools

import pytest

from tests.real.cluster_state import provision
from tests.real.conftest import Cluster
from tools.realtier.kube import Kube, describe, wait_for
from tools.realtier.nodes import GKE_ACCELERATOR_LABEL, GKE_POOL_LABEL
from tools.realtier.stacks import render

pytestmark = pytest.mark.real
GKE_STACKS = ["gcp-a3", "a3-high", "gcp-a4"]
REPLICAS = 4


def scheduled_nodes(kube: Kube, namespace: str) -> list[str] | None:
    pods = kube.list("v1", "Pod", namespace)
    nodes = [p["spec"].get("nodeName") for p in pods]
    return [str(n) for n in nodes] if len(nodes) == REPLICAS and all(nodes) else None


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_gke_system_pods_land_on_the_system_pool(cluster: Cluster, stack: str) -> None:
    kube, stack_render = cluster.kube, render(stack)
    provision(kube, stack_render)
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-dns"}})
    labels = {"k8s-app": "kube-dns"}
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "kube-dns", "namespace": "kube-dns"},
            "spec": {
                "replicas": REPLICAS,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "kubedns", "image": "kube-dns"}]},
                },
            },
        }
    )
    placed = wait_for(
        f"{stack}: system pods scheduled",
        functools.partial(scheduled_nodes, kube, "kube-dns"),
        explain=functools.partial(describe, kube, "kube-dns"),
    )
    pools = {n.name: n.labels for n in stack_render.nodes()}
    assert {pools[name][GKE_POOL_LABEL] for name in placed} == {"system"}
    assert not any(GKE_ACCELERATOR_LABEL in pools[name] for name in placed)
