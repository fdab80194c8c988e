"""Every pod a GKE stack's cluster must run has a node pool that admits it.

Nodes are modelled from the rendered node pools (GKE's own node labels, the pool's taints, and
the taint GKE puts on GPU nodes); pods are GKE's system workloads, every rendered DaemonSet and
the training pods, each with its tolerations and required node affinity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpu_cluster.offline.engine import ProgramRun
from tests.conftest import manifests, pod_spec, run_stack

GKE_STACKS = ["gcp-a3", "a3-high", "gcp-a4"]
# GKE labels every node with its pool and, on GPU nodes, the accelerator type; GPU nodes also get
# this taint (cloud.google.com/kubernetes-engine/docs/how-to/gpus), whatever the pool declares.
POOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
_EFFECTS["NO_EXECUTE"] = "NoExecute"
# GKE's own Deployments on every Standard cluster (kube-dns, which MASTER_ADDR needs;
# metrics-server, konnectivity-agent, event-exporter ...), modelled as the worst case: tolerating
# nothing and asking for no particular node.
SYSTEM_POD: dict[str, Any] = {"containers": [{"name": "kube-dns"}]}


@dataclass(frozen=True)
class Pool:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    max_nodes: int


def pools(run: ProgramRun) -> list[Pool]:
    out = []
    for r in run.of_type("gcp:container/nodePool:NodePool"):
        config = r.inputs.get("nodeConfig", {})
        labels = {POOL_LABEL: r.inputs["name"], **config.get("labels", {})}
        taints = [
            {"key": t["key"], "value": t.get("value", ""), "effect": _EFFECTS[t["effect"]]}
            for t in config.get("taints", [])
        ]
        accelerators = config.get("guestAccelerators", [])
        if accelerators:
            labels[ACCELERATOR_LABEL] = accelerators[0]["type"]
            taints.append(GPU_TAINT)
        size = r.inputs.get("nodeCount") or r.inputs.get("autoscaling", {}).get(
            "totalMaxNodeCount", 0
        )
        out.append(Pool(r.inputs["name"], labels, taints, size))
    return out


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator") == "Exists":
            if t.get("key") in (None, "", taint["key"]):
                return True
        elif t.get("key") == taint["key"] and t.get("value", "") == taint["value"]:
            return True
    return False


def _expression_holds(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    value = labels.get(expr["key"])
    op = expr["operator"]
    if op == "In":
        return value in expr["values"]
    if op == "NotIn":
        return value not in expr["values"]
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    raise AssertionError(f"operator {op} not modelled")


def affinity_admits(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    required = (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    selector = spec.get("nodeSelector", {})
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    if not required:
        return True
    return any(
        all(_expression_holds(e, labels) for e in term.get("matchExpressions", []))
        for term in required["nodeSelectorTerms"]
    )


def admitting_pools(run: ProgramRun, spec: dict[str, Any]) -> list[str]:
    tolerations = list(spec.get("tolerations", []))
    requests_gpu = any(
        "nvidia.com/gpu" in c.get("resources", {}).get("limits", {}) for c in spec["containers"]
    )
    if requests_gpu:
        # GKE's ExtendedResourceToleration admission adds this to pods that request GPUs.
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    return [
        p.name
        for p in pools(run)
        if all(tolerates(tolerations, t) for t in p.taints if t["effect"] != "PreferNoSchedule")
        and affinity_admits(spec, p.labels)
    ]


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_gke_system_pods_have_an_untainted_pool(stack: str) -> None:
    assert admitting_pools(run_stack(stack), SYSTEM_POD) == ["system"], (
        "kube-dns and the other GKE system pods would stay Pending"
    )


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_every_daemonset_runs_on_the_a3_pool(stack: str) -> None:
    run = run_stack(stack)
    daemonsets = manifests(run, "DaemonSet")
    # The node agents of the stack's mode: TCPX(O)'s device injector, or the gIB installer.
    agent = "nccl-rdma-installer" if stack == "gcp-a4" else "device-injector"
    assert agent in {d["metadata"]["name"] for d in daemonsets}
    gpu_pools = [p.name for p in pools(run) if ACCELERATOR_LABEL in p.labels]
    for ds in daemonsets:
        assert admitting_pools(run, ds["spec"]["template"]["spec"]) == gpu_pools, ds["metadata"][
            "name"
        ]


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        *((stack, ()) for stack in GKE_STACKS),  # gcp-a4 ships flex-start: the pool scales from 0
        ("gcp-a4", ("gcp.provisioning=reservation", "gcp.reservation=a4-res")),
    ],
)
def test_training_pods_fit_the_a3_pool_one_per_node(stack: str, overrides: tuple[str, ...]) -> None:
    run = run_stack(stack, *overrides)
    spec = pod_spec(run)
    (pool,) = admitting_pools(run, spec)
    (a3,) = [p for p in pools(run) if p.name == pool]
    assert ACCELERATOR_LABEL in a3.labels
    (sts,) = manifests(run, "StatefulSet")
    assert a3.max_nodes >= sts["spec"]["replicas"]


def test_the_model_refuses_what_kubernetes_refuses() -> None:
    """Guards the model itself: a tainted-only cluster leaves system pods Pending."""
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    assert not tolerates([], taint)
    assert tolerates([{"operator": "Exists"}], taint)
    assert not tolerates([{"key": "nvidia.com/gpu", "value": "other"}], taint)
    assert tolerates(
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], taint
    )
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": POOL_LABEL, "operator": "In", "values": ["a"]}
                            ]
                        }
                    ]
                }
            }
        }
    }
    assert affinity_admits(spec, {POOL_LABEL: "a"})
    assert not affinity_admits(spec, {POOL_LABEL: "system"})
