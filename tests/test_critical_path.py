"""The creation-order graph and its critical path (gpu_cluster/offline/graph.py, used by
bench/critical_path.py), on a hand-made render whose answer is worked out by hand; and the bench
itself, run on a stack `gpu-cluster new` wrote."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpu_cluster.offline.engine import mock_id, resource_urn
from gpu_cluster.offline.graph import Graph
from tests.cli import ROOT, program_copy

STACK, PROJECT = "s", "p"
COMPONENT = "p:index:Thing"


def urn(type_: str, name: str, parent: str = "") -> str:
    return resource_urn(STACK, PROJECT, parent, type_, name)


def row(
    urn_: str, depends_on: tuple[str, ...] = (), provider: str = "", parent: str = ""
) -> dict[str, Any]:
    return {
        "type": urn_.split("::")[2].split("$")[-1],
        "name": urn_.split("::")[-1],
        "urn": urn_,
        "parent": parent.split("::")[-1] if parent else "stack",
        "inputs": {},
        "options": {"dependsOn": list(depends_on), "provider": provider},
    }


# network (1) -> cluster (10) -> provider (0) -> namespace (1)
#                      \-> pool (30) -> workload component (0) -> pods (5), a child
NETWORK = urn("gcp:network", "net")
CLUSTER = urn("gcp:cluster", "cluster")
POOL = urn("gcp:pool", "pool")
PROVIDER = urn("pulumi:providers:kubernetes", "k8s")
NAMESPACE = urn("kubernetes:core/v1:Namespace", "ns")
WORKLOAD = urn(COMPONENT, "workload")
PODS = urn("kubernetes:apps/v1:StatefulSet", "pods", WORKLOAD)
MINUTES = {NETWORK: 1, CLUSTER: 10, POOL: 30, PROVIDER: 0, NAMESPACE: 1, WORKLOAD: 0, PODS: 5}


def graph() -> Graph:
    return Graph(
        [
            row(NETWORK),
            row(CLUSTER, (NETWORK,)),
            row(POOL, (CLUSTER,)),
            row(PROVIDER, (CLUSTER,)),
            row(NAMESPACE, provider=mock_id("k8s")),
            row(WORKLOAD, (POOL,)),
            row(PODS, (NAMESPACE,), provider=mock_id("k8s"), parent=WORKLOAD),
        ]
    )


def test_a_child_waits_for_what_its_parent_waits_for_and_a_resource_for_its_provider() -> None:
    g = graph()
    assert g.waits_for(PODS) == {WORKLOAD, POOL, CLUSTER, NETWORK, NAMESPACE, PROVIDER}
    assert g.waits_for(NAMESPACE) == {PROVIDER, CLUSTER, NETWORK}
    path = g.path_to(PODS, lambda u: u == POOL)
    assert path is not None
    assert [(e.why, e.prerequisite) for e in path] == [("parent", WORKLOAD), ("dependsOn", POOL)]


def test_the_critical_path_is_the_longest_chain_of_waits() -> None:
    g = graph()
    finish = g.finish_times(lambda u: MINUTES[u])
    # The pods start after the pool (1 + 10 + 30), not the namespace (1 + 10 + 0 + 1).
    assert finish[NAMESPACE] == 12
    assert finish[PODS] == 46
    assert g.critical_path(PODS, finish) == [NETWORK, CLUSTER, POOL, WORKLOAD, PODS]


def test_an_added_edge_lengthens_only_what_now_waits_for_it() -> None:
    g = graph()
    before = g.with_edge(PROVIDER, POOL, "dependsOn")
    finish = before.finish_times(lambda u: MINUTES[u])
    assert finish[NAMESPACE] == 42  # now after the pool
    assert finish[PODS] == 47  # and the pods, which wait for the namespace, one minute later
    assert g.finish_times(lambda u: MINUTES[u])[NAMESPACE] == 12  # the original is unchanged


def test_the_bench_models_a_job_set_stack_gpu_cluster_new_wrote(tmp_path: Path) -> None:
    """A JobSet stack on OpenShift reads the Kueue and JobSet CRDs (reads have no inputs, so no
    kind): the bench runs on it, as README's time to first step has a newcomer do."""
    shipped = (ROOT / "Pulumi.nerc-production.yaml").read_text()
    project = program_copy(tmp_path / "project", {"nerc-production": shipped})
    (project / "bench").mkdir()
    shutil.copy2(ROOT / "bench" / "critical_path.py", project / "bench")
    new = (
        "new", "--stack", "team-b", "--from", "nerc-production", "--set", "name=team-b",
        "--set", "workload.command[0]=/workspace/train.py",
    )  # fmt: skip
    wrote = subprocess.run(
        [sys.executable, "-m", "gpu_cluster", *new],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrote.returncode == 0, wrote.stderr
    bench = subprocess.run(
        [sys.executable, "bench/critical_path.py", "--stacks", "team-b"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bench.returncode == 0, bench.stderr
    # A CRD read, the ClusterQueue and the LocalQueue (1 s each), then the JobSet's pods (11 min).
    assert "| team-b | 11.1 | 11.1 | - | 0.1 | 0.1 |" in bench.stdout
    assert (
        "- team-b: kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition "
        "gpu-cluster-queue-controllers-clusterqueues (0.02) -> "
    ) in bench.stdout
