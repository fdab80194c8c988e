"""A `workload.kind: jobset` stack's own objects on the real managers (issue #19): the queue the
stack creates (Topology, ResourceFlavor, ClusterQueue, LocalQueue) admits its JobSet with Kueue
(the tier's version, tools/realtier/build.py), Topology Aware Scheduling puts both pods in the one
block that has room, JobSet runs them with the hostnames MASTER_ADDR names and the ranks
NODE_RANK reads; the status and timeline commands show it; a failed pod restarts the whole set,
a configuration error (exit 78) fails the run at once, and the stop command takes the pods and
leaves the claims.

The stack is gcp-a3 (TCPXO sidecar and init steps count against the quota) with shared claims;
its GPU pool's node is copied into four nodes in three GCE topology blocks, only block-2 with two.
Then GKE queued provisioning (gcp-a4), and an OpenShift stack placed by the racks it names.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.config.derived import queue_name
from gpu_cluster.config.workload import REPLICATED_JOB
from gpu_cluster.facts.kubernetes import parse_quantity
from gpu_cluster.facts.kueue import (
    GKE_TOPOLOGY_LEVELS,
    HOSTNAME_LEVEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_API,
    PODSET_LABEL,
)
from gpu_cluster.plan.launch import TRAINING_CONTAINER
from tests.conftest import GKE_RWX, stack_context
from tests.real.cluster_state import (
    deploy_on,
    node_ready,
    paste,
    referenced_objects,
    start_on_record,
)
from tests.real.conftest import Cluster
from tests.real.prometheus import evaluated, query, running_prometheus, value_of
from tests.real.queue_state import admitted, condition, explain, run_pods, running
from tests.test_dashboard import cloud_queries
from tools.realtier.kube import Kube, Object, wait_for
from tools.realtier.nodes import GKE_ACCELERATOR_LABEL, FakeNode
from tools.realtier.stacks import StackRender, render, volumes_for

pytestmark = pytest.mark.real

OVERRIDES = (
    "workload.kind=jobset",
    "workload.command[0]=/workspace/train.py",
    "workload.maxRestarts=3",
    *GKE_RWX,
)
BLOCK, SUBBLOCK, HOST, _ = GKE_TOPOLOGY_LEVELS
# GPU node -> (block, subblock, host)
PLACES = {
    "gpu-0": ("block-1", "subblock-1", "host-0"),
    "gpu-1": ("block-2", "subblock-2", "host-1"),
    "gpu-2": ("block-2", "subblock-2", "host-2"),
    "gpu-3": ("block-3", "subblock-3", "host-3"),
}
# EX_CONFIG: what the launchers exit with on a configuration error (scripts/launch-common.sh).
CONFIG_ERROR = 78


def nodes_in_blocks(stack: StackRender) -> list[FakeNode]:
    """The stack's system nodes, and its GPU node as four nodes placed as PLACES says."""
    nodes = stack.nodes()
    gpu = next(n for n in nodes if GKE_ACCELERATOR_LABEL in n.labels)
    placed = [
        dataclasses.replace(
            gpu,
            name=name,
            labels={**gpu.labels, BLOCK: block, SUBBLOCK: subblock, HOST: host},
        )
        for name, (block, subblock, host) in PLACES.items()
    ]
    return [n for n in nodes if GKE_ACCELERATOR_LABEL not in n.labels] + placed


def fail(kube: Kube, pod: Object, exit_code: int) -> None:
    """The training container of `pod` exits with `exit_code` (what the kubelet reports)."""
    meta = pod["metadata"]
    terminated = {"exitCode": exit_code, "reason": "Error", "startedAt": None, "finishedAt": None}
    kube.patch_status(
        "v1",
        "Pod",
        meta["name"],
        meta["namespace"],
        {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": TRAINING_CONTAINER,
                    "image": pod["spec"]["containers"][0]["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ],
        },
    )


def job_set(kube: Kube, namespace: str, name: str) -> Object:
    return kube.get(JOBSET_API, "JobSet", name, namespace)


def stack_token(kube: Kube, secret: Object) -> str | None:
    """The token the token controller wrote into the stack's token Secret; None until then."""
    meta = secret["metadata"]
    data = kube.get("v1", "Secret", meta["name"], meta["namespace"]).get("data") or {}
    return base64.b64decode(data["token"]).decode() if "token" in data else None


def dashboard_shows_the_queue(cluster: Cluster, stack: StackRender, workdir: Path) -> None:
    """The stack's dashboard (monitoring.dashboard, GKE's) on a real Prometheus that scrapes
    the real Kueue as the stack's PodMonitoring says, with the token of the stack's own
    ServiceAccount (so its grant of Kueue's metrics-reader role is what the real Kueue
    authorizes): with the stack's one run admitted, its Queue panels say so; every query
    parses."""
    assert cluster.kueue_metrics is not None
    (monitoring,) = (m for m in stack.of_kind("PodMonitoring") if "kueue" in m["metadata"]["name"])
    (endpoint,) = monitoring["spec"]["endpoints"]
    (secret,) = stack.of_kind("Secret")
    assert secret["metadata"]["name"] == endpoint["authorization"]["credentials"]["secret"]["name"]
    token = wait_for("the token controller's token", lambda: stack_token(cluster.kube, secret))
    scrape = {
        "job_name": "kueue",
        "scheme": endpoint["scheme"],
        "metrics_path": endpoint["path"],
        # Where the tier's Kueue serves the chart's `metrics` port (tools/realtier/controllers.py).
        "static_configs": [{"targets": [urllib.parse.urlsplit(cluster.kueue_metrics).netloc]}],
        "authorization": {"type": endpoint["authorization"]["type"], "credentials": token},
        "tls_config": {"insecure_skip_verify": endpoint["tls"]["insecureSkipVerify"]},
    }
    shown = cloud_queries(stack.run)
    waiting_runs, admitted_runs, admission_wait, _ = shown["Queue"]
    with running_prometheus(cluster.tools, workdir / "prometheus", [scrape]) as prometheus:
        seen = lambda: value_of(prometheus, admitted_runs) == 1  # noqa: E731
        wait_for("Prometheus seeing the run admitted", seen)
        waiting = query(prometheus, waiting_runs)
        assert sorted(s["metric"]["status"] for s in waiting) == ["active", "inadmissible"]
        assert [float(s["value"][1]) for s in waiting] == [0, 0]
        # A rate needs two scrapes of the histogram: a series (NaN: no admission since it was
        # first scraped) from the second on.
        wait_for(
            "two scrapes of the admission wait",
            lambda: len(query(prometheus, admission_wait)) == 1,
        )
        for expression in (q for row in shown.values() for q in row):
            assert evaluated(prometheus, expression)["status"] == "success", expression


def test_the_stack_s_jobset_is_queued_placed_in_one_block_and_restarted_whole(
    queued_cluster: Cluster, tmp_path: Path
) -> None:
    cluster, kube = queued_cluster, queued_cluster.kube
    stack = render("gcp-a3", OVERRIDES)
    s = stack.settings
    namespace, name = s.namespace, s.name

    why = functools.partial(explain, cluster, namespace)

    deploy_on(kube, nodes_in_blocks(stack), stack)

    workload = wait_for(
        "the JobSet admitted", functools.partial(admitted, kube, namespace, name), explain=why
    )
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == s.nodes == 2
    # One run uses the whole quota, as Kueue counts the pods (sidecars and init steps too): a
    # second run waits, and the first is never left waiting for a few millicores.
    (queue,) = stack.of_kind("ClusterQueue")
    (flavor,) = queue["spec"]["resourceGroups"][0]["flavors"]
    quota = {r["name"]: parse_quantity(r["nominalQuota"]) for r in flavor["resources"]}
    used = {k: parse_quantity(v) for k, v in assignment["resourceUsage"].items()}
    assert used == quota
    pods = wait_for(
        "both pods running",
        functools.partial(running, kube, namespace, name, s.nodes),
        explain=why,
    )
    # Both in block-2, the one block with two free GPU nodes.
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-1", "gpu-2"]
    dashboard_shows_the_queue(queued_cluster, stack, tmp_path)

    # Rank i is the pod the launcher's MASTER_ADDR (rank 0) and podDnsNames call rank i.
    outputs = stack.run.outputs
    by_rank = {int(p["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION]): p for p in pods}
    assert sorted(by_rank) == [0, 1]
    for rank, pod in by_rank.items():
        spec = pod["spec"]
        fqdn = f"{spec['hostname']}.{spec['subdomain']}.{namespace}.svc.cluster.local"
        assert fqdn == outputs["podDnsNames"][rank]
        env = {e["name"]: e for e in spec["containers"][0]["env"]}
        field = env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert field == f"metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']"
        assert env["MASTER_ADDR"]["value"] == outputs["masterAddr"] == outputs["podDnsNames"][0]
        # What the admission gate reads (scripts/admitted.sh): the label Kueue put on the pod.
        field = env["KUEUE_PODSET"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert field == f"metadata.labels['{PODSET_LABEL}']"
        assert pod["metadata"]["labels"][PODSET_LABEL] == REPLICATED_JOB

    # The exported commands, run as a user pastes them, with the real kubectl and a kubeconfig
    # whose context has the name get-credentials gives it.
    context = stack_context("gcp-a3")
    printed = paste(cluster, tmp_path, context, outputs["statusCommand"])
    status = [line.split() for line in printed.splitlines()]
    # The run (not suspended), its Workload (admitted in the stack's queue), its pods (running).
    assert status[1][:3] == [name, "0", "false"], status  # NAME, RESTARTS, SUSPENDED
    workload_row = next(r for r in status if r[0] == workload["metadata"]["name"])
    assert workload_row[1:4] == [queue_name(s), queue["metadata"]["name"], "True"]
    pod_rows = [r for r in status if r[0].startswith(f"{name}-node-0-")]
    assert sorted((r[2], r[6]) for r in pod_rows) == [("Running", "gpu-1"), ("Running", "gpu-2")]

    # The start's timeline, from the cluster's own records (kwok pulls no image: no event).
    printed = paste(cluster, tmp_path, context, outputs["timelineCommand"])
    assert {"admitted", "agents ready"} <= set(start_on_record(printed))

    # A pod fails (a lost GPU, an NCCL timeout): the whole set starts again, admitted as before.
    first = {p["metadata"]["uid"] for p in pods}
    fail(kube, pods[1], 1)

    def restarted() -> list[Object] | None:
        restarts = (job_set(kube, namespace, name).get("status") or {}).get("restarts", 0)
        live = running(kube, namespace, name, s.nodes)
        fresh = live is not None and not first & {p["metadata"]["uid"] for p in live}
        return live if restarts == 1 and fresh else None

    again = wait_for("the whole set restarted", restarted, explain=why)
    assert sorted(p["spec"]["nodeName"] for p in again) == ["gpu-1", "gpu-2"]
    # Still the admitted run's pods: the admission gate lets the restarted ones train too.
    assert [p["metadata"]["labels"][PODSET_LABEL] for p in again] == [REPLICATED_JOB] * 2

    # A configuration error fails the run at once, restarts left or not.
    fail(kube, again[0], CONFIG_ERROR)

    def failed() -> Object | None:
        live = job_set(kube, namespace, name)
        reported = condition(live, "Failed")
        return live if reported is not None and reported["status"] == "True" else None

    ended = wait_for("the run failed", failed, explain=why)
    assert ended["status"].get("restarts") == 1

    # The stop command deletes the JobSet; its pods go, the claims stay.
    paste(cluster, tmp_path, context, outputs["stopCommand"])
    wait_for("the run's pods gone", lambda: not run_pods(kube, namespace, name), explain=why)
    for claim in stack.of_kind("PersistentVolumeClaim"):
        meta: dict[str, Any] = claim["metadata"]
        assert kube.exists("v1", "PersistentVolumeClaim", meta["name"], meta["namespace"])


PROVISIONING_REQUEST = "autoscaling.x-k8s.io/v1"
# The annotation Kueue puts on an admitted run's pods naming the ProvisioningRequest whose
# nodes they take (cluster-autoscaler apis provisioningrequest/autoscaling.x-k8s.io/v1
# ProvisioningRequestPodAnnotationKey).
CONSUMES = "autoscaling.x-k8s.io/consume-provisioning-request"
QUEUED = (*OVERRIDES, "gcp.queuedProvisioning=true")


def provisioning_requests(kube: Kube, namespace: str) -> list[Object] | None:
    return kube.list(PROVISIONING_REQUEST, "ProvisioningRequest", namespace) or None


def provisioned(kube: Kube, request: Object) -> None:
    """What GKE's cluster autoscaler reports once the request's nodes are all up."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = request["metadata"]
    kube.patch_status(
        PROVISIONING_REQUEST,
        "ProvisioningRequest",
        meta["name"],
        meta["namespace"],
        {
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "reason": kind,
                    "message": "",
                    "lastTransitionTime": now,
                }
                for kind in ("Accepted", "Provisioned")
            ]
        },
    )


def test_queued_provisioning_gets_a_run_s_nodes_before_kueue_admits_it(
    queued_cluster: Cluster,
) -> None:
    """gcp-a4 on flex-start with queued provisioning: the run waits in the queue with no pods
    while Kueue asks for its nodes (a ProvisioningRequest of GKE's class, all of them at once);
    only once they are provisioned is it admitted, its pods on those nodes."""
    cluster, kube = queued_cluster, queued_cluster.kube
    stack = render("gcp-a4", QUEUED)
    s = stack.settings
    namespace, name = s.namespace, s.name

    why = functools.partial(explain, cluster, namespace)

    nodes = stack.nodes()
    gpu = [n for n in nodes if GKE_ACCELERATOR_LABEL in n.labels]
    assert len(gpu) == s.nodes
    for node in (n for n in nodes if n not in gpu):
        kube.create(node.manifest())
    kube.create_all(volumes_for(stack.of_kind("PersistentVolumeClaim")))
    kube.create_all(referenced_objects(stack))
    kube.create_all(stack.objects())

    (request,) = wait_for(
        "Kueue's ProvisioningRequest",
        functools.partial(provisioning_requests, kube, namespace),
        explain=why,
    )
    spec = request["spec"]
    assert spec["provisioningClassName"] == "queued-provisioning.gke.io"
    assert spec["parameters"] == {"maxRunDurationSeconds": "604800"}
    (pod_set,) = spec["podSets"]
    assert pod_set["count"] == s.nodes
    # The nodes are not there: nothing is admitted and no pod waits for them.
    assert admitted(kube, namespace, name) is None
    assert run_pods(kube, namespace, name) == []

    # GKE brings up all the run's nodes (tainted gke-queued) and says so.
    for node in gpu:
        kube.create(node.manifest())
        wait_for(f"node {node.name} Ready", functools.partial(node_ready, kube, node.name))
    provisioned(kube, request)

    wait_for("the run admitted", functools.partial(admitted, kube, namespace, name), explain=why)
    pods = wait_for(
        "its pods running",
        functools.partial(running, kube, namespace, name, s.nodes),
        explain=why,
    )
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(n.name for n in gpu)
    for pod in pods:
        assert pod["metadata"]["annotations"][CONSUMES] == request["metadata"]["name"]


RACK = "example.com/rack"
RACKS = {"gpu-a": "rack-a", "gpu-b1": "rack-b", "gpu-b2": "rack-b", "gpu-c": "rack-c"}


def test_an_openshift_jobset_lands_in_one_rack_of_the_levels_the_stack_names(
    queued_cluster: Cluster,
) -> None:
    """nerc-production as a JobSet stack with workload.queue.topologyLevels [example.com/rack]:
    its own Topology (rack, then the node) places both pods in the one rack with two free GPU
    hosts."""
    cluster, kube = queued_cluster, queued_cluster.kube
    stack = render(
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=/workspace/train.py",
            f"workload.queue.topologyLevels[0]={RACK}",
        ),
    )
    s = stack.settings
    (host, *_) = stack.nodes()
    racked = [
        dataclasses.replace(host, name=name, labels={**host.labels, RACK: rack})
        for name, rack in RACKS.items()
    ]
    deploy_on(kube, racked, stack)

    why = functools.partial(explain, cluster, s.namespace)
    workload = wait_for(
        "the run admitted", functools.partial(admitted, kube, s.namespace, s.name), explain=why
    )
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"]["levels"] == [HOSTNAME_LEVEL]
    pods = wait_for(
        "its pods running",
        functools.partial(running, kube, s.namespace, s.name, s.nodes),
        explain=why,
    )
    # Placed by Kueue's Topology Aware Scheduling: each pod bound to the host it assigned.
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-b1", "gpu-b2"]
    for pod in pods:
        assert pod["spec"]["nodeSelector"][HOSTNAME_LEVEL] == pod["spec"]["nodeName"]
