#!/usr/bin/env python3
"""Node health runner: runs a GPU check on each of the stack's GPU nodes and labels the node with
the result as cluster-health-scanner's checks do, for the node health gate (node_health_gate.py).

Each pass:
- A check Job that finished: its node gets `aiinfra/<check>-healthcheck-result` (`pass`, or
  `fail`) and `aiinfra/<check>-healthcheck-runtime-sec` (now, Unix seconds); a failed node also
  gets the taint `aiinfra/<check>-healthcheck=failed:NoSchedule`, a passed one loses it. The
  log names the node, the check and why it failed (the pod's termination message). The Job goes.
  A check Job whose node is no longer one of the GPU nodes goes too.
- A node whose result is older than the recheck age, or that has none, and has no check Job,
  gets one: the PodTemplate's pod, required on that node. The pod asks for the training pod's
  GPUs, so on a busy node it waits, Pending, and the node is checked when its run ends.

Environment (the stack's Deployment sets it):
  HEALTH_RUNNER_NAMESPACE        the namespace of the PodTemplate and the check Jobs
  HEALTH_RUNNER_NODES            label selector of the nodes to check
  HEALTH_RUNNER_TEMPLATE         the check's PodTemplate
  HEALTH_RUNNER_CHECK            the check's name in the node labels (gpu)
  HEALTH_RUNNER_RECHECK_SECONDS  how old a result may get before the node is checked again
  HEALTH_RUNNER_POLL_SECONDS     how often it looks
  and kube_api.py's (the API server, the ServiceAccount)

Standard library only (with kube_api.py beside it): it runs in a plain Python image. Exit 78
(EX_CONFIG) when the environment is incomplete.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube_api import CREATE, MERGE, Api, Object, every, from_env

PROGRAM = "node_health_runner"
# cluster-health-scanner's node labels and taint (GoogleCloudPlatform/cluster-health-scanner
# 81c525d src/gpu_healthcheck/gpu_healthcheck.py _RESULT_LABEL_KEY, HEALTHCHECK_TIME_LABEL_KEY,
# TAINT_KEY, TAINT_VALUE, TAINT_EFFECT); "fail" if failed else "pass".
RESULT_LABEL = "aiinfra/{}-healthcheck-result"
TIME_LABEL = "aiinfra/{}-healthcheck-runtime-sec"
TAINT_KEY = "aiinfra/{}-healthcheck"
TAINT = {"value": "failed", "effect": "NoSchedule"}
PASS, FAIL = "pass", "fail"
# What marks the runner's Jobs (and their pods) and the node each checks.
CHECK_LABEL = "gpu-cluster.io/health-check"
NODE_ANNOTATION = "gpu-cluster.io/node"
# The Job controller's label on a Job's pods (kubernetes pkg/apis/batch types.go, 1.27+).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# A finished Job the runner never read (it was stopped) goes after a day.
JOB_TTL_SECONDS = 86400
NAME_MAX = 63
BATCH = "/apis/batch/v1"


@dataclass(frozen=True)
class Runner:
    """The HEALTH_RUNNER_* settings (above), the ages in seconds."""

    namespace: str
    nodes: str
    template: str
    check: str
    recheck: int
    poll: float


def due(labels: Mapping[str, str], check: str, now: float, recheck: int) -> bool:
    """Whether a node labelled `labels` is to be checked: no readable time of its last result,
    or one older than `recheck` seconds."""
    try:
        ran = float(labels[TIME_LABEL.format(check)])
    except (KeyError, ValueError):
        return True
    return now - ran > recheck


def job_name(template: str, node: str) -> str:
    """The check Job of `node`: one at a time, the same name each time; a Job's name is a pod
    label value, so at most 63 characters."""
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    return f"{template[: NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"


def check_job(template: Mapping[str, Any], node: str, runner: Runner) -> Object:
    """The Job that runs `template`'s pod once on `node` (by name: the node's own labels may
    name another), never retried: a failure is the result, unless the pod was disrupted."""
    meta = template["template"].get("metadata", {})
    labels = {**meta.get("labels", {}), CHECK_LABEL: runner.check}
    spec = dict(template["template"]["spec"])
    on_node = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    spec["affinity"] = {
        **spec.get("affinity", {}),
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [on_node]}
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(runner.template, node),
            "namespace": runner.namespace,
            "labels": labels,
            "annotations": {NODE_ANNOTATION: node},
        },
        "spec": {
            "backoffLimit": 0,
            # A pod evicted or preempted (a drain, a higher-priority pod) says nothing of the
            # node: the Job starts another instead of failing (Kubernetes' pod failure policy).
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "Ignore",
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                    }
                ]
            },
            "ttlSecondsAfterFinished": JOB_TTL_SECONDS,
            "template": {"metadata": {**meta, "labels": labels}, "spec": spec},
        },
    }


def outcome(job: Mapping[str, Any]) -> str | None:
    """PASS or FAIL for a finished Job, None while it runs (or waits)."""
    for condition in job.get("status", {}).get("conditions", []):
        if condition["status"] != "True":
            continue
        if condition["type"] == "Complete":
            return PASS
        if condition["type"] == "Failed":
            return FAIL
    return None


def why_failed(job: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> str:
    """What the check's pod said when it ended (its termination message, else the container's
    or the Job's reason)."""
    said = []
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses", []):
            ended = status.get("state", {}).get("terminated") or {}
            text = (ended.get("message") or "").strip() or ended.get("reason")
            if text:
                said.append(text)
    if said:
        return "; ".join(said)
    failed = [c for c in job.get("status", {}).get("conditions", []) if c["type"] == "Failed"]
    return "; ".join(c.get("message") or c.get("reason", "") for c in failed) or "no reason given"


def node_patch(node: Mapping[str, Any], check: str, result: str, now: float) -> Object:
    """The merge patch that records `result` on `node`: its two labels, and its taint set or
    cleared (the whole list, as a merge patch replaces it; at the node's resourceVersion, so a
    change made meanwhile makes it fail and the next pass read it again)."""
    key = TAINT_KEY.format(check)
    kept = [t for t in node.get("spec", {}).get("taints") or [] if t["key"] != key]
    taints = kept + ([{"key": key, **TAINT}] if result == FAIL else [])
    return {
        "metadata": {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "labels": {RESULT_LABEL.format(check): result, TIME_LABEL.format(check): str(int(now))},
        },
        "spec": {"taints": taints or None},
    }


def record(api: Api, runner: Runner, job: Mapping[str, Any], node: Mapping[str, Any]) -> None:
    """Label (and taint or untaint) `node` with the result of its finished check `job`."""
    result = outcome(job)
    assert result is not None
    name = node["metadata"]["name"]
    patch = node_patch(node, runner.check, result, time.time())
    api.call("PATCH", f"/api/v1/nodes/{name}", patch, content_type=MERGE)
    said = ""
    if result == FAIL:
        selector = f"{JOB_NAME_LABEL}={job['metadata']['name']}"
        pods = api.call(
            "GET", f"/api/v1/namespaces/{runner.namespace}/pods", query={"labelSelector": selector}
        )["items"]
        said = f" ({why_failed(job, pods)}); tainted {TAINT_KEY.format(runner.check)}"
    print(f"{name}: {runner.check}: {result}{said}", flush=True)


def reconcile(api: Api, runner: Runner, now: float) -> None:
    """One pass: record every finished check, start one on every node that is due."""
    nodes = {
        n["metadata"]["name"]: n
        for n in api.call("GET", "/api/v1/nodes", query={"labelSelector": runner.nodes})["items"]
    }
    jobs_path = f"{BATCH}/namespaces/{runner.namespace}/jobs"
    jobs = api.call("GET", jobs_path, query={"labelSelector": f"{CHECK_LABEL}={runner.check}"})
    checking = set()
    for job in jobs["items"]:
        node_name = job["metadata"].get("annotations", {}).get(NODE_ANNOTATION, "")
        checking.add(node_name)
        if node_name in nodes:
            if outcome(job) is None:
                continue
            record(api, runner, job, nodes[node_name])
        # Recorded, or its node is gone (its pod would wait for it for ever).
        api.call(
            "DELETE",
            f"{jobs_path}/{job['metadata']['name']}",
            query={"propagationPolicy": "Background"},
        )
    template = None
    for name, node in sorted(nodes.items()):
        labels = node["metadata"].get("labels", {})
        if name in checking or not due(labels, runner.check, now, runner.recheck):
            continue
        if template is None:
            template = api.call(
                "GET", f"/api/v1/namespaces/{runner.namespace}/podtemplates/{runner.template}"
            )
        api.call("POST", jobs_path, check_job(template, name, runner), content_type=CREATE)
        print(f"{name}: {runner.check}: checking", flush=True)


def runner_from_env(env: Mapping[str, str]) -> Runner:
    return Runner(
        namespace=env["HEALTH_RUNNER_NAMESPACE"],
        nodes=env["HEALTH_RUNNER_NODES"],
        template=env["HEALTH_RUNNER_TEMPLATE"],
        check=env["HEALTH_RUNNER_CHECK"],
        recheck=int(env["HEALTH_RUNNER_RECHECK_SECONDS"]),
        poll=float(env["HEALTH_RUNNER_POLL_SECONDS"]),
    )


def main() -> None:
    runner = from_env(PROGRAM, lambda: runner_from_env(os.environ))
    api = Api.in_cluster()
    print(
        f"{PROGRAM}: checking {runner.check} on nodes {runner.nodes!r} "
        f"with {runner.namespace}/{runner.template}",
        flush=True,
    )
    every(PROGRAM, runner.poll, lambda: reconcile(api, runner, time.time()))


if __name__ == "__main__":
    main()
