"""The stack's own controllers in pods on real nodes (issue #39): gcp-a3 as a JobSet stack behind
the node health gate, with the stack's health runner and its `gpu` check, on a control plane
with Kueue's and JobSet's CRDs (no managers: no run starts) and two real nodes, a system node and
a GPU node labelled and tainted as the stack's node pools are (no GPU in it, no DCGM).

The gate, the runner and the runs' ledger exporter run in their Deployments' pods on the system
node, reach the API server through the `kubernetes` Service (kube-proxy) with their
ServiceAccounts' tokens and the stack's RBAC and admission policy, and do their job: the gate
marks its AdmissionCheck Active; the runner starts the GPU check on the GPU node, whose pod
(gpu-check.sh) finds no DCGM host engine and says the check could not run, and the runner
labels the node `error` without a taint; the exporter, with the package modules its ConfigMap
ships, reads the queue's runs (none starts) and is refused nothing.
Deleted, each controller's container ends on the SIGTERM the kubelet sends, with the exit status
of its handler, inside the grace period.

What differs from a cluster: every image is the tier's test image (the stack's `image` settings;
no registry here), the controllers' `imagePullPolicy: Always` becomes IfNotPresent (Always asks a
registry), and GKE's DaemonSets (Google's driver and TCPXO installers, which need GPUs and
Google's images) are not created.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.real.cluster_state import end_of_deleted, referenced_objects
from tests.real.conftest import RealCluster, real_nodes_cluster
from tests.real.health_checks import keys, labels, taints
from tests.real.test_jobset_stack import OVERRIDES
from tools.realtier.build import Tools
from tools.realtier.charts import chart_crds
from tools.realtier.images import NodeImages
from tools.realtier.kube import Object, describe, install_crd_objects, install_crds, wait_for
from tools.realtier.nodes import GKE_ACCELERATOR_LABEL
from tools.realtier.realnodes import NodeSpec
from tools.realtier.stacks import StackRender, render, volumes_for

pytestmark = pytest.mark.real

SYSTEM_NODE, GPU_NODE = "real-node-0", "real-node-1"
CONTROLLERS = ("node-health-gate", "node-health-runner", "run-ledger")
# What a controller's handler exits with on SIGTERM (scripts/kube_api.py stop_on_sigterm).
# Unhandled, the signal is dropped (the container's PID 1) and the kubelet's SIGKILL after the
# grace period ends it with 137.
HANDLED_SIGTERM_EXIT = 0
# The controllers' pods' grace period, the default (k8s.io/api core/v1 PodSpec
# terminationGracePeriodSeconds; their Deployments set none), after which the kubelet's SIGKILL
# ends a container that ignored SIGTERM. Not a measure of speed: how soon a deleted pod's
# container ends after the request varies with the host's load (3 s to 11 s seen here).
GRACE = timedelta(seconds=30)


@pytest.fixture
def controller_stack(node_images: NodeImages) -> StackRender:
    image = node_images.test.name
    return render(
        "gcp-a3",
        (
            *OVERRIDES,
            "workload.queue.healthGate.enabled=true",
            "workload.queue.healthGate.checks[0]=gpu",
            "workload.queue.healthGate.runner.enabled=true",
            f"workload.queue.healthGate.image={image}",
            f"workload.queue.healthGate.runner.dcgmImage={image}",
            # The runs' ledger exporter, with the package modules its ConfigMap ships.
            "monitoring.runMetrics.enabled=true",
            r"launcher.firstStepPattern=^step \d+",
            f"monitoring.runMetrics.ledgerImage={image}",
        ),
    )


@pytest.fixture
def controller_cluster(
    tools: Tools, node_images: NodeImages, controller_stack: StackRender, tmp_path: Path
) -> Iterator[RealCluster]:
    """A system node and a GPU node of the stack's pools, Kueue's and JobSet's CRDs served."""
    nodes = controller_stack.nodes()
    system = next(n for n in nodes if GKE_ACCELERATOR_LABEL not in n.labels)
    gpu = next(n for n in nodes if GKE_ACCELERATOR_LABEL in n.labels)
    specs = [
        NodeSpec(SYSTEM_NODE, labels=system.labels),
        NodeSpec(
            GPU_NODE,
            labels=gpu.labels,
            taints=tuple(gpu.taints),
            extended_resources={"nvidia.com/gpu": "8"},
        ),
    ]
    with real_nodes_cluster(tools, node_images, tmp_path, specs) as cluster:
        install_crds(cluster.kube, tools.crds)
        install_crd_objects(cluster.kube, chart_crds(tools))
        yield cluster


def _as_created_here(objects: list[Object]) -> list[Object]:
    """The stack's objects but GKE's DaemonSets, the controllers pulling only when absent."""
    kept = [o for o in objects if o["kind"] != "DaemonSet"]
    for deployment in (o for o in kept if o["kind"] == "Deployment"):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            container["imagePullPolicy"] = "IfNotPresent"
    return kept


def _running_pod(cluster: RealCluster, namespace: str, deployment: str) -> Object | None:
    for pod in cluster.kube.list("v1", "Pod", namespace):
        status = pod.get("status") or {}
        if pod["metadata"]["name"].startswith(f"{deployment}-") and all(
            s.get("ready") for s in status.get("containerStatuses") or [{}]
        ):
            return pod
    return None


def test_the_stacks_controllers_work_in_pods_and_stop_at_sigterm(
    controller_cluster: RealCluster, controller_stack: StackRender
) -> None:
    kube, stack = controller_cluster.kube, controller_stack
    s = stack.settings
    kube.create_all(volumes_for(stack.of_kind("PersistentVolumeClaim")))
    kube.create_all(referenced_objects(stack))
    # No manager runs here, so no chart is installed; its namespace holds objects of the stack.
    kube.create_all(stack.chart_namespaces())
    kube.create_all(_as_created_here(stack.objects()))

    def explain() -> str:
        logs = "".join(
            f"\n{pod['metadata']['name']}:\n{kube.pod_log(pod['metadata']['name'], s.namespace)}"
            for name in CONTROLLERS
            if (pod := _running_pod(controller_cluster, s.namespace, f"{s.name}-{name}"))
        )
        return describe(kube, s.namespace) + logs + controller_cluster.nodes.log_tail(0, "kubelet")

    pods = {
        name: wait_for(
            f"{name} running",
            functools.partial(_running_pod, controller_cluster, s.namespace, f"{s.name}-{name}"),
            explain=explain,
        )
        for name in CONTROLLERS
    }
    assert {p["spec"]["nodeName"] for p in pods.values()} == {SYSTEM_NODE}

    # The gate: its AdmissionCheck marked Active (Kueue admits nothing through an inactive one).
    (check,) = stack.of_kind("AdmissionCheck")

    def active() -> Object | None:
        live = kube.get("kueue.x-k8s.io/v1beta2", "AdmissionCheck", check["metadata"]["name"])
        conditions = (live.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Active"), None)

    condition = wait_for("the AdmissionCheck Active", active, explain=explain)
    assert condition["status"] == "True", condition
    assert condition["message"] == f"answered by gpu-cluster-node-health-gate in {s.namespace}"

    # The runner: the GPU check ran on the GPU node and could not judge it (no DCGM).
    result, _time_label, taint = keys("gpu")
    wait_for(
        f"{GPU_NODE}'s gpu result",
        lambda: labels(kube, GPU_NODE).get(result),
        explain=lambda: (
            explain() + kube.pod_log(pods["node-health-runner"]["metadata"]["name"], s.namespace)
        ),
    )
    assert labels(kube, GPU_NODE)[result] == "error"
    assert all(t["key"] != taint for t in taints(kube, GPU_NODE)), taints(kube, GPU_NODE)
    assert result not in labels(kube, SYSTEM_NODE)
    # The runner labels, then says so: its line may come a moment after the label.
    said = (
        f"{GPU_NODE}: gpu: error: the check could not run "
        "(nv-hostengine did not start in the check's pod"
    )
    runner = pods["node-health-runner"]["metadata"]["name"]
    wait_for(
        "the runner's line for the result",
        lambda: said in kube.pod_log(runner, s.namespace),
        explain=lambda: kube.pod_log(runner, s.namespace),
    )

    # The exporter: started from what its ConfigMap ships, past its first pass.
    exporter = pods["run-ledger"]["metadata"]["name"]
    wait_for(
        "the ledger exporter reading the queue's runs",
        lambda: (
            "run-ledger: the ledgers of the runs in LocalQueue"
            in kube.pod_log(exporter, s.namespace)
        ),
        explain=lambda: kube.pod_log(exporter, s.namespace),
    )

    for name, pod in pods.items():
        log = kube.pod_log(pod["metadata"]["name"], s.namespace)
        assert "403" not in log, log  # nothing refused by the stack's RBAC or policy
        states = kube.delete_and_follow("v1", "Pod", pod["metadata"]["name"], s.namespace)
        terminated, after = end_of_deleted(states)
        assert terminated["exitCode"] == HANDLED_SIGTERM_EXIT, (name, terminated)
        assert timedelta(0) <= after < GRACE, (name, after, terminated)
