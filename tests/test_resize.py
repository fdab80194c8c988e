"""Config edits change what they should and nothing else structural."""

from __future__ import annotations

import json
from typing import Any

from gpu_cluster.offline.engine import ProgramRun
from tests.conftest import manifests, one, run_stack, scripts_data


def changed_paths(a: Any, b: Any, path: str = "") -> set[str]:
    """Dotted paths where two JSON-like values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: set[str] = set()
        for key in set(a) | set(b):
            out |= changed_paths(a.get(key), b.get(key), f"{path}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = set()
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out |= changed_paths(x, y, f"{path}[{i}]")
        return out
    return set() if a == b else {path}


def by_urn(run: ProgramRun) -> dict[str, dict[str, Any]]:
    return {r.urn: r.inputs for r in run.resources}


def added_claims(before: ProgramRun, after: ProgramRun) -> set[str]:
    """Names of the resources a resize adds: per-pod storage grows by one claim per volume and
    new pod; nothing else may appear."""
    added = set(by_urn(after)) - set(by_urn(before))
    assert all("PersistentVolumeClaim::" in urn for urn in added), added
    return {urn.split("::")[-1] for urn in added}


def test_more_nodes_changes_replicas_world_size_and_hostfile_only() -> None:
    before, after = run_stack("barcelona"), run_stack("barcelona", "nodes=4")
    assert set(by_urn(before)) <= set(by_urn(after))  # nothing removed
    assert added_claims(before, after) == {
        f"gpu-cluster-workload-{v}-{i}" for v in ("workspace", "datasets") for i in (2, 3)
    }
    changes: set[str] = set()
    for urn, inputs in by_urn(before).items():
        for p in changed_paths(inputs, by_urn(after)[urn]):
            changes.add(f"{urn.split('::')[-1]}{p}")
    env_changes = {c for c in changes if ".env[" in c}
    assert changes - env_changes == {
        "gpu-cluster-workload.spec.replicas",
        "gpu-cluster-workload.spec.template.metadata.annotations.gpu-cluster/scripts-sha256",
        "gpu-cluster-workload-scripts.data.hostfile",
        "gpu-cluster-workload-scripts.data.ds_config.json",
    }
    env = {
        e["name"]: e.get("value")
        for e in one(after, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert (env["NNODES"], env["WORLD_SIZE"], env["TORCHRUN_NNODES"]) == ("4", "16", "4")
    hostfile = scripts_data(after)["hostfile"].splitlines()
    assert hostfile == [
        f"ml-dev-env-{i}.ml-dev-env-headless.nccl-test.svc.cluster.local slots=4" for i in range(4)
    ]
    assert json.loads(scripts_data(after)["ds_config.json"])["train_batch_size"] == 4 * 16


def test_elastic_range_reaches_torchrun() -> None:
    run = run_stack("barcelona", "launcher.minNodes=1", "launcher.maxNodes=4")
    env = {
        e["name"]: e.get("value")
        for e in one(run, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["TORCHRUN_NNODES"] == "1:4"


def test_resizing_gke_changes_only_the_node_count_and_replicas() -> None:
    before, after = run_stack("gcp-a3"), run_stack("gcp-a3", "nodes=16")
    assert set(by_urn(before)) <= set(by_urn(after))
    assert len(added_claims(before, after)) == 2 * 14
    changes = set()
    for urn, inputs in by_urn(before).items():
        for p in changed_paths(inputs, by_urn(after)[urn]):
            changes.add(f"{urn.split('::')[-1]}{p}")
    structural = {c for c in changes if ".env[" not in c and "scripts" not in c}
    assert structural == {"gpu-cluster-a3mega.nodeCount", "gpu-cluster-workload.spec.replicas"}


def test_gke_tcp_mode_drops_gpudirect_pieces_and_keeps_the_cluster() -> None:
    tcpxo, tcp = run_stack("gcp-a3"), run_stack("gcp-a3", "networkMode=tcp")
    assert (
        tcp.of_type("gcp:container/cluster:Cluster")[0].inputs
        == tcpxo.of_type("gcp:container/cluster:Cluster")[0].inputs
    )
    assert not manifests(tcp, "DaemonSet")
    assert not manifests(tcp, "Network") and not manifests(tcp, "GKENetworkParamSet")
    assert len(tcp.of_type("gcp:compute/network:Network")) == 1  # the host VPC only
    spec = one(tcp, "StatefulSet")["spec"]["template"]["spec"]
    assert "initContainers" not in spec
    assert (
        "networking.gke.io/interfaces"
        not in one(tcp, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    )
