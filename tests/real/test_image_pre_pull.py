"""openshift.prePull on the real control plane: barcelona's image pre-pull DaemonSet runs on
every listed GPU host that is up, does not hold `pulumi up` (the real engine's) on one that is
down, and rolls an image edit out to every host.

The host that is down is a Node no kubelet (kwok) keeps alive: the real node lifecycle
controller marks it unreachable, as it does a crashed or powered-off host."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.real.cluster_state import (
    daemonset_settled,
    live_workload,
    pods_of,
    referenced_objects,
    stack_engine,
)
from tests.real.conftest import Cluster
from tools.realtier.controlplane import FAKE_NODE_ANNOTATION
from tools.realtier.kube import Kube, wait_for
from tools.realtier.stacks import render, volumes_for

pytestmark = pytest.mark.real

UNREACHABLE = "node.kubernetes.io/unreachable"
NEW_IMAGE = "image=nvcr.io/nvidia/pytorch:25.02-py3"


def unreachable(kube: Kube, name: str) -> bool:
    taints = kube.get("v1", "Node", name)["spec"].get("taints") or []
    return any(t["key"] == UNREACHABLE for t in taints)


def test_pre_pull_runs_on_every_live_host_and_rolls_a_new_image_to_each(
    cluster: Cluster, tmp_path: Path
) -> None:
    kube, stack = cluster.kube, render("barcelona")
    (ds,) = stack.of_kind("DaemonSet")
    assert ds["metadata"]["name"] == "ml-dev-env-image-pre-pull"
    *live_hosts, down = stack.nodes()
    kube.create_all(n.manifest() for n in live_hosts)
    dead = down.manifest()
    del dead["metadata"]["annotations"][FAKE_NODE_ANNOTATION]  # no kubelet: never heard from
    kube.create(dead)
    wait_for(f"node {down.name} unreachable", functools.partial(unreachable, kube, down.name))

    kube.create_all(volumes_for(stack.of_kind("PersistentVolumeClaim")))
    kube.create_all(referenced_objects(stack))
    engine = stack_engine(cluster, "barcelona", tmp_path)
    # `pulumi up` returns once the provider has awaited the DaemonSet: the host that is down
    # does not hold it. The training pods' one-per-node rule does not count the pre-pull pods:
    # both come up.
    engine.up()
    sts, (live,) = live_workload(kube, stack)
    assert daemonset_settled(kube, ds) is not None
    assert live["status"]["desiredNumberScheduled"] == len(live_hosts)
    placed = {p["spec"]["nodeName"] for p in pods_of(kube, ds)}
    assert placed == {n.name for n in live_hosts}
    assert len(pods_of(kube, sts)) == stack.settings.nodes

    # An image edit through `pulumi up`: when it returns, every live host runs a pod of the
    # new image.
    engine.up(NEW_IMAGE)
    rolled = daemonset_settled(kube, ds)
    assert rolled is not None and rolled["metadata"]["generation"] == 2
    pods = pods_of(kube, ds)
    assert {p["spec"]["nodeName"] for p in pods} == placed
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {
        NEW_IMAGE.split("=", 1)[1]
    }
