"""The real tier's fixtures: the built tools, and a fresh control plane per test.

The tools are built by `python -m tools.realtier build` (`.ci/run` does it first); a test never
builds. Without them these tests skip, except in CI (CI=true), where a missing tool fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpu_cluster.facts.kueue import OPENSHIFT_MANAGED_NAMESPACE_LABEL
from tests.prerequisites import unavailable
from tools.realtier.build import Tools, locate
from tools.realtier.charts import chart_crds
from tools.realtier.controllers import start_controllers
from tools.realtier.controlplane import ControlPlane
from tools.realtier.images import ImageArchive, NodeImages, locate_images
from tools.realtier.kube import Kube, install_crd_objects, install_crds
from tools.realtier.nodenet import NodeNetwork
from tools.realtier.realnodes import NodeSpec, RealNodes


def on_one_worker(module: str) -> pytest.MarkDecorator:
    """Keeps a module's tests on one pytest-xdist worker (`--dist loadgroup`, as .ci/run runs
    the tier): a module-scoped cluster is then set up once, not again on each worker that takes
    one of the module's tests, and two such clusters training at once never starve each other."""
    return pytest.mark.xdist_group(module)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """on_one_worker rides on pytest-xdist renaming each grouped test's node ID `<id>@<group>`
    on its workers, which pytest 9.2's node IDs silently undo (pytest-dev/pytest-xdist#1386):
    such a test fails before its fixtures, rather than set its module's cluster up again on
    every worker."""
    grouped = item.get_closest_marker("xdist_group") is not None
    # config.option.loadgroup: set on pytest-xdist's workers under --dist loadgroup.
    if grouped and getattr(item.config.option, "loadgroup", False) and "@" not in item.nodeid:
        pytest.fail(
            "--dist loadgroup does not group this test's module onto one worker here "
            "(pytest-dev/pytest-xdist#1386): pytest < 9.2 (requirements-dev.txt)"
        )


@dataclass(frozen=True)
class Cluster:
    plane: ControlPlane
    kube: Kube
    tools: Tools
    # Where Kueue serves its metrics (tools/realtier/controllers.py); None: no Kueue.
    kueue_metrics: str | None = field(default=None, kw_only=True)

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig


@pytest.fixture(scope="session")
def tools() -> Tools:
    found = locate()
    if found is None:
        unavailable(
            "real-tier tools not built (or no Go on PATH): run `python -m tools.realtier build`"
        )
    return found


# What the real nodes' tests run: a control plane (etcd, Kubernetes, kwok) and the nodes' tools.
REAL_NODE_FAMILIES = ("kubernetes", "etcd", "kwok", "cni", "coredns")


@pytest.fixture(scope="session")
def node_tools() -> Tools:
    """The tools the real nodes' tests run (not the engine's or the queue controllers')."""
    found = locate(families=REAL_NODE_FAMILIES)
    if found is None:
        unavailable(
            "real-node tools not built (or no Go on PATH): run `python -m tools.realtier build`"
        )
    return found


@pytest.fixture(scope="session")
def node_images(node_tools: Tools) -> NodeImages:
    """The real nodes' images, and what running them needs on the host (root, containerd)."""
    missing = [c for c in ("containerd", "runc", "ctr", "nsenter") if shutil.which(c) is None]
    if missing or os.geteuid() != 0:
        unavailable(f"real nodes need root and {', '.join(missing) or 'containerd'} (.ci/run)")
    found = locate_images()
    if found is None:
        unavailable("real-node images not built: run `python -m tools.realtier build`")
    return found


@dataclass(frozen=True)
class RealCluster(Cluster):
    nodes: RealNodes
    images: NodeImages


# Two nodes, each advertising GPUs as a GPU node's device plugin would (the resource NVIDIA's
# device plugin registers): pods that ask for them schedule as on a cluster.
REAL_NODES = tuple(
    NodeSpec(f"real-node-{i}", extended_resources={"nvidia.com/gpu": "8"}) for i in range(2)
)


@contextlib.contextmanager
def real_nodes_cluster(
    node_tools: Tools,
    node_images: NodeImages,
    tmp_path: Path,
    specs: Sequence[NodeSpec] = REAL_NODES,
    images: Sequence[ImageArchive] | None = None,
    *,
    multus: bool = False,
) -> Iterator[RealCluster]:
    """A control plane on the nodes' LAN with real nodes (containerd, kubelet, CNI bridge, each
    in its own network namespace) holding `images` (the test image by default) and cluster DNS;
    `multus`: Multus as the nodes' CNI, the bridge its cluster network (nodemultus.py); all
    removed afterwards."""
    network = NodeNetwork.claim(len(specs))
    try:
        network.up()
        plane = ControlPlane(
            node_tools, workdir=tmp_path / "control-plane", address=network.gateway
        )
        with plane:
            kube = Kube(plane.kubeconfig)
            nodes = RealNodes(
                node_tools,
                plane,
                network,
                specs,
                images=images or (node_images.test,),
                sandbox_image=node_images.pause,
                multus=multus,
            )
            with nodes:
                yield RealCluster(plane, kube, node_tools, nodes, node_images)
    finally:
        network.down()


@pytest.fixture
def cluster(tools: Tools, tmp_path: Path) -> Iterator[Cluster]:
    """etcd, kube-apiserver, controller-manager, scheduler and kwok with the upstream CRDs."""
    plane = ControlPlane(tools, workdir=tmp_path / "control-plane")
    with plane:
        kube = Kube(plane.kubeconfig)
        install_crds(kube, tools.crds)
        yield Cluster(plane, kube, tools)


def _queued(tools: Tools, tmp_path: Path, opt_in_label: str | None = None) -> Iterator[Cluster]:
    stages = tuple(p for p in tools.kwok_stages if p.name != "pod-complete.yaml")
    plane = ControlPlane(tools, workdir=tmp_path / "control-plane", kwok_stages=stages)
    with plane:
        kube = Kube(plane.kubeconfig)
        install_crds(kube, tools.crds)
        controllers = start_controllers(plane, kube, tools, opt_in_label)
        yield Cluster(plane, kube, tools, kueue_metrics=controllers.kueue_metrics)


@pytest.fixture
def queued_cluster(tools: Tools, tmp_path: Path) -> Iterator[Cluster]:
    """`cluster` with the Kueue and JobSet managers running, and Job pods that run until deleted,
    as training does (kwok's pod-complete stage is left out)."""
    yield from _queued(tools, tmp_path)


@pytest.fixture
def openshift_queued_cluster(tools: Tools, tmp_path: Path) -> Iterator[Cluster]:
    """`queued_cluster` with Kueue set up as Red Hat's operator sets it up on OpenShift: it
    manages jobs only in namespaces labelled kueue.openshift.io/managed=true."""
    yield from _queued(tools, tmp_path, OPENSHIFT_MANAGED_NAMESPACE_LABEL)


@pytest.fixture(scope="module")
def api(tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """One control plane with the upstream CRDs (Kueue's and JobSet's too) for a whole module
    of dry-run creates."""
    workdir = tmp_path_factory.mktemp("api") / "control-plane"
    with ControlPlane(tools, workdir=workdir) as plane:
        kube = Kube(plane.kubeconfig)
        install_crds(kube, [*tools.crds, *tools.data("autoscaler-crds").values()])
        install_crd_objects(kube, chart_crds(tools))
        yield kube
