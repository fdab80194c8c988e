"""The stack's own node health runner (workload.queue.healthGate.runner, issue #19) on the real
managers, beside the gate: scripts/node_health_runner.py as the stack's Deployment runs it, with
its ServiceAccount's token alone, so RBAC and the stack's ValidatingAdmissionPolicy judge it.

gcp-a3 as a JobSet stack behind the gate with the runner and the `gpu` check only, its GPU node
copied into four nodes in three GCE topology blocks, only block-2 with two (gpu-1, gpu-2). No
node was ever checked. The runner starts one check Job per GPU node (none on the system nodes);
the test, as the kubelet, ends each check pod as DCGM would: gpu-2's failed, the others passed,
but gpu-3's is first preempted (the Job tries again; no result from it).
The runner labels all four, taints gpu-2 and deletes the Jobs; the run, which needs two nodes of
one block, waits unplaced. An admin asks for a recheck of gpu-2 (removes its time label); it
passes, loses its taint, and the run is admitted onto gpu-1 and gpu-2. What the policy refuses
the runner's account (another label, another taint, a cordon) is tried with its token.
"""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.plan.health_runner import CHECK_LABEL
from tests.real.conftest import Cluster
from tests.real.health_checks import check_pods, end_check, gated_stack, keys, labels, taints
from tests.real.script_controllers import in_pod
from tests.script_modules import load_script
from tools.realtier.kube import Object, wait_for

pytestmark = pytest.mark.real

kube_api = load_script("kube_api")
RUNNER = (
    "workload.queue.healthGate.enabled=true",
    "workload.queue.healthGate.retrySeconds=10",
    "workload.queue.healthGate.checks[0]=gpu",
    "workload.queue.healthGate.runner.enabled=true",
)
GPU_NODES = ("gpu-0", "gpu-1", "gpu-2", "gpu-3")
BAD = "gpu-2"
PREEMPTED = "gpu-3"
# What DCGM prints for a failed test, as gpu-check.sh passes it on (its termination message).
DCGM_FAILURE = "dcgmi diag --run 2 (exit 226): | Memory | Fail - GPU 3: ECC DBE |"


def on_every_gpu_node(pods: dict[str, Object]) -> dict[str, Object] | None:
    return pods if sorted(pods) == list(GPU_NODES) else None


def refused(api: Any, node: Object, patch: Object) -> str:
    """The API server's refusal of `patch` to `node` as the runner's account."""
    with pytest.raises(urllib.error.HTTPError) as caught:
        api.call(
            "PATCH", f"/api/v1/nodes/{node['metadata']['name']}", patch, content_type=kube_api.MERGE
        )
    body = json.loads(caught.value.read())
    assert caught.value.code == 422, body
    message: str = body["message"]
    return message


def test_the_runner_checks_each_gpu_node_and_the_gate_keeps_runs_off_the_one_that_failed(
    queued_cluster: Cluster, tmp_path: Path
) -> None:
    cluster, kube = queued_cluster, queued_cluster.kube
    result, ran, taint = keys("gpu")
    with gated_stack(cluster, RUNNER, tmp_path) as gated:
        s, log, explained = gated.settings, gated.log, gated.explained
        namespace, name = s.namespace, s.name
        # One check on each GPU node, none elsewhere; the test ends them as DCGM would.
        checks = wait_for(
            "a check pod running on each GPU node",
            lambda: on_every_gpu_node(check_pods(kube, namespace, "gpu")),
            explain=explained,
        )
        ends = {"gpu-0": "passed", "gpu-1": "passed", BAD: "failed", PREEMPTED: "preempted"}
        for node_name, check_pod in checks.items():
            how = ends[node_name]
            end_check(kube, check_pod, how, DCGM_FAILURE if how == "failed" else "")
        # The preempted check says nothing of its node: its Job starts another pod there.
        (retried,) = wait_for(
            f"a second check pod on {PREEMPTED}",
            lambda: (
                [
                    p
                    for n, p in check_pods(kube, namespace, "gpu").items()
                    if n == PREEMPTED
                    and p["metadata"]["uid"] != checks[PREEMPTED]["metadata"]["uid"]
                ]
                or None
            ),
            explain=explained,
        )
        end_check(kube, retried, "passed")
        wait_for(
            "every GPU node labelled",
            lambda: all(result in labels(kube, n) for n in GPU_NODES),
            explain=explained,
        )
        assert {n: labels(kube, n)[result] for n in GPU_NODES} == {
            "gpu-0": "pass",
            "gpu-1": "pass",
            "gpu-2": "fail",
            "gpu-3": "pass",
        }
        assert all(labels(kube, n)[ran].isdigit() for n in GPU_NODES)
        bad_taint = {"key": taint, "value": "failed", "effect": "NoSchedule"}
        assert bad_taint in taints(kube, BAD)
        assert all(bad_taint not in taints(kube, n) for n in GPU_NODES if n != BAD)
        assert f"{BAD}: gpu: fail ({DCGM_FAILURE}); tainted {taint}" in log.read_text()
        # The Jobs went with their results; no node was checked twice.
        wait_for(
            "the check Jobs deleted",
            lambda: (
                not kube.list("batch/v1", "Job", namespace, label_selector=f"{CHECK_LABEL}=gpu")
            ),
            explain=explained,
        )
        assert log.read_text().count(": gpu: checking") == len(GPU_NODES)
        # Block-2 has one healthy node: the run waits, unplaced.
        gated.wait_unplaced(kube)

        # What the runner's account may not do to a node, by the stack's admission policy.
        account = tmp_path / f"{name}-node-health-runner" / "serviceaccount"
        api = kube_api.Api.in_cluster(in_pod(cluster, account))
        healthy = kube.get("v1", "Node", "gpu-0")
        version = {"resourceVersion": healthy["metadata"]["resourceVersion"]}
        said = refused(api, healthy, {"metadata": {**version, "labels": {"example.com/x": "y"}}})
        assert "may change only the labels" in said, said
        said = refused(api, healthy, {"spec": {"taints": None}})
        assert "may change only the taint" in said, said
        said = refused(api, healthy, {"spec": {"unschedulable": True}})
        assert "or whether it is cordoned" in said, said

        # An admin asks for gpu-2 to be checked again; it passes this time.
        kube.merge_patch("v1", "Node", BAD, None, {"metadata": {"labels": {ran: None}}})
        (again,) = wait_for(
            "a check pod on gpu-2 again",
            lambda: list(check_pods(kube, namespace, "gpu").values()) or None,
            explain=explained,
        )
        assert again["spec"]["nodeName"] == BAD
        end_check(kube, again, "passed")
        assert gated.wait_running(kube, BAD, "gpu") == ["gpu-1", "gpu-2"]
