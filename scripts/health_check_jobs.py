"""The node health runner's decisions (node_health_runner.py): which nodes are due for a check and
where its pod may go, the check Job it starts on them, and what a finished Job says of its
nodes (their labels and taint). Standard library only; shipped beside node_health_runner.py,
which imports it."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kube_api import Object

# cluster-health-scanner's node labels and taint (GoogleCloudPlatform/cluster-health-scanner
# 81c525d src/gpu_healthcheck/gpu_healthcheck.py _RESULT_LABEL_KEY, HEALTHCHECK_TIME_LABEL_KEY,
# TAINT_KEY, TAINT_VALUE, TAINT_EFFECT; src/nccl_healthcheck/nccl_startup.py the same for nccl);
# "fail" if failed else "pass".
RESULT_LABEL = "aiinfra/{}-healthcheck-result"
TIME_LABEL = "aiinfra/{}-healthcheck-runtime-sec"
TAINT_KEY = "aiinfra/{}-healthcheck"
TAINT = {"value": "failed", "effect": "NoSchedule"}
PASS, FAIL = "pass", "fail"
# A check that could not run: the node is neither passed nor failed (nor tainted for it).
ERROR = "error"
# What a check pod exits with when it could not run (sysexits.h EX_TEMPFAIL; gpu-check.sh).
NOT_RUN_EXIT = 75
# The checks that run on two nodes at once: cluster-health-scanner's NCCL check (NHOSTS "2",
# 81c525d deploy/helm/health_checks/nccl_healthcheck/*.yaml).
PAIRED = frozenset({"nccl"})
# What marks the runner's Jobs (and their pods), the nodes each checks, and a pair's partner
# that had passed before.
CHECK_LABEL = "gpu-cluster.io/health-check"
NODES_ANNOTATION = "gpu-cluster.io/nodes"
REFERENCE_ANNOTATION = "gpu-cluster.io/reference"
# The Job controller's label on a Job's pods (kubernetes pkg/apis/batch types.go, 1.27+).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# A finished Job the runner never read (it was stopped) goes after a day.
JOB_TTL_SECONDS = 86400
# An Indexed Job's pods are named in DNS <job>-<index> (kubernetes.io/docs/concepts/workloads/
# controllers/job, "Completion mode"), a DNS label of at most 63 characters.
NAME_MAX = 61
# The device plugin's GPU resource (NVIDIA k8s-device-plugin; GKE's GPU device plugin too).
GPU = "nvidia.com/gpu"
# How long a pair's pods may take to start, beyond their own deadline, before the Job ends.
PAIR_START_SECONDS = 900
# Taint effects that keep a pod off a node it does not tolerate (a node cordoned carries
# node.kubernetes.io/unschedulable:NoSchedule).
KEEPING_OFF = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Check:
    """A check by its name in the node labels, and the PodTemplate of its pod."""

    name: str
    template: str

    @property
    def paired(self) -> bool:
        return self.name in PAIRED


@dataclass(frozen=True)
class Runner:
    """The HEALTH_RUNNER_* settings (above), the ages in seconds."""

    namespace: str
    nodes: str
    checks: tuple[Check, ...]
    recheck: int
    poll: float
    retry: int

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


def due(labels: Mapping[str, str], check: str, now: float, runner: Runner) -> bool:
    """Whether a node labelled `labels` is to be checked: no readable time of its last result,
    or one older than the runner's recheck age (an `error`: its retry delay)."""
    try:
        ran = float(labels[TIME_LABEL.format(check)])
    except (KeyError, ValueError):
        return True
    error = result_of(labels, check) == ERROR
    return now - ran > (runner.retry if error else runner.recheck)


def passed(labels: Mapping[str, str], check: str, now: float, runner: Runner) -> bool:
    """Whether a node labelled `labels` passed `check` within the runner's recheck age."""
    return result_of(labels, check) == PASS and not due(labels, check, now, runner)


def tolerates(tolerations: Sequence[Mapping[str, str]], node: Mapping[str, Any]) -> bool:
    """Whether a pod with `tolerations` may be placed on `node`: it is not cordoned, and each of
    its NoSchedule and NoExecute taints is tolerated (Kubernetes' matching: an empty key with
    Exists tolerates all, an empty effect any effect)."""
    spec = node.get("spec", {})
    if spec.get("unschedulable"):
        return False

    def tolerated(taint: Mapping[str, str]) -> bool:
        for t in tolerations:
            if t.get("effect") and t["effect"] != taint.get("effect"):
                continue
            if t.get("operator") == "Exists" and t.get("key", "") in ("", taint["key"]):
                return True
            if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
                return True
        return False

    return all(tolerated(t) for t in spec.get("taints") or [] if t.get("effect") in KEEPING_OFF)


def pairs(
    due_nodes: Iterable[str], good: Iterable[str], suspects: set[str]
) -> list[tuple[str, ...]]:
    """Which nodes to check pairwise now, each in one pair at most: a due node with a `good`
    one (it passed: the reference, last in the pair) while any is free, suspects only so; then
    the other due nodes two by two, in name order."""
    free = sorted(good)
    found: list[tuple[str, ...]] = []
    untested = []
    for node in sorted(due_nodes):
        if free:
            found.append((node, free.pop(0)))
        elif node not in suspects:
            untested.append(node)
    found += [tuple(untested[i : i + 2]) for i in range(0, len(untested) - 1, 2)]
    return found


def job_name(template: str, nodes: Sequence[str]) -> str:
    """The check Job of `nodes`: the same name each time, short enough that its pods' DNS names
    (<job>-<index>) are DNS labels."""
    digest = hashlib.sha256(",".join(nodes).encode()).hexdigest()[:10]
    return f"{template[: NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"


def check_job(
    template: Mapping[str, Any],
    nodes: Sequence[str],
    check: Check,
    runner: Runner,
    reference: str | None = None,
) -> Object:
    """The Job that runs `template`'s pod once on each of `nodes` (by name: the nodes' own labels
    may name others), never retried: a failure is the result, unless a pod was disrupted. Its
    pods are indexed; a pair's find each other as <job>-0 in the template's subdomain."""
    meta = template["template"].get("metadata", {})
    labels = {**meta.get("labels", {}), CHECK_LABEL: check.name}
    name = job_name(check.template, nodes)
    spec = copy.deepcopy(template["template"]["spec"])
    # One term a node (terms are ORed): a node field selector takes one value (the API
    # server's validation of matchFields).
    on_nodes = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        for node in nodes
    ]
    spec["affinity"] = {
        **spec.get("affinity", {}),
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": on_nodes}
        },
    }
    if check.paired:
        rendezvous = [
            {"name": "MASTER_ADDR", "value": f"{name}-0.{spec['subdomain']}"},
            {"name": "RDZV_ID", "value": name},
        ]
        for container in spec["containers"]:
            kept = [
                e for e in container.get("env", []) if e["name"] not in ("MASTER_ADDR", "RDZV_ID")
            ]
            container["env"] = kept + rendezvous
    annotations = {NODES_ANNOTATION: ",".join(nodes)}
    if reference is not None:
        annotations[REFERENCE_ANNOTATION] = reference
    # A pair's Job ends when its pods' own deadline and the time to start them have passed:
    # one pod waiting for its node's GPUs holds neither node for longer.
    deadline = (
        {"activeDeadlineSeconds": spec["activeDeadlineSeconds"] + PAIR_START_SECONDS}
        if check.paired
        else {}
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": runner.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "completions": len(nodes),
            "parallelism": len(nodes),
            "completionMode": "Indexed",
            # No pod is retried, and one that fails does not end the other's: each ends by
            # itself, its status kept for the result (a Job that fails as a whole deletes the
            # pods still running, and their statuses with them).
            "backoffLimitPerIndex": 0,
            **deadline,
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


def run_span(pod: Mapping[str, Any]) -> tuple[datetime, datetime] | None:
    """When the check in `pod` started and ended on its node (the kubelet's times of its
    container; a running one has not ended); None if it never started there or the pod was
    disrupted (evicted, preempted)."""
    status = pod.get("status", {})
    if any(
        c["type"] == "DisruptionTarget" and c["status"] == "True"
        for c in status.get("conditions", [])
    ):
        return None
    for container in status.get("containerStatuses", []):
        state = container.get("state", {})
        running = state.get("running") or {}
        ended = state.get("terminated") or {}
        if ended.get("startedAt") and ended.get("finishedAt"):
            return (_time(ended["startedAt"]), _time(ended["finishedAt"]))
        if running.get("startedAt"):
            return (_time(running["startedAt"]), datetime.max.replace(tzinfo=UTC))
    return None


def _time(rfc3339: str) -> datetime:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))


def unchecked(nodes: Sequence[str], pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Those of `nodes` the Job's check (its `pods`) says nothing of: no pod of it ran there,
    or (pairwise) the pods did not run at the same time, so they never met (one waited for
    its node's GPUs until the other had given up)."""
    spans = {}
    for pod in pods:
        span = run_span(pod)
        if span is not None:
            spans[pod.get("spec", {}).get("nodeName")] = span
    missing = [n for n in nodes if n not in spans]
    if missing:
        return missing
    # The kubelet's times are whole seconds: a start in the second another ended counts as
    # meeting.
    if max(spans[n][0] for n in nodes) > min(spans[n][1] for n in nodes):
        return list(nodes)
    return []


def terminated_states(pods: Sequence[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Each container's `terminated` state of the check's pods, in order ({} for one that has
    not ended)."""
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses", []):
            yield status.get("state", {}).get("terminated") or {}


def could_not_run(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a pod of the check ended saying the check could not run (NOT_RUN_EXIT): then it
    judged none of its nodes, a pair's partner included."""
    return any(state.get("exitCode") == NOT_RUN_EXIT for state in terminated_states(pods))


# How the fabric check's rank 0 states the bus bandwidth it measured, first in its termination
# message (fabric_verdict.py summary).
BUSBW = re.compile(r"^busbw ([0-9]+(?:\.[0-9]+)?) GB/s ")


def result_of(labels: Mapping[str, str], check: str) -> str | None:
    """A node's last result of `check` (its result label), None if never checked."""
    return labels.get(RESULT_LABEL.format(check))


def measured_busbw(pods: Sequence[Mapping[str, Any]]) -> float | None:
    """The average bus bandwidth (GB/s) a pair's check measured, from the termination message
    of its rank 0's pod; None when no pod states one (the check could not run, or ended
    before measuring)."""
    for state in terminated_states(pods):
        found = BUSBW.match(state.get("message") or "")
        if found:
            return float(found.group(1))
    return None


def why_failed(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str:
    """What the check's pods said when they ended (their termination messages, else the
    containers' or the Job's reason)."""
    said: list[str] = []
    for state in terminated_states(pods):
        text = (state.get("message") or "").strip() or state.get("reason")
        if text and text not in said:
            said.append(text)
    if said:
        return "; ".join(said)
    failed = [c for c in job.get("status", {}).get("conditions", []) if c["type"] == "Failed"]
    return "; ".join(c.get("message") or c.get("reason", "") for c in failed) or "no reason given"


def node_patch(node: Mapping[str, Any], check: str, result: str, now: float) -> Object:
    """The merge patch that records `result` on `node`: its two labels, and its taint set
    (FAIL), cleared (PASS) or left as it was (ERROR: the check judged nothing) (the whole list,
    as a merge patch replaces it; at the node's resourceVersion, so a change made meanwhile makes
    it fail and the next pass read it again)."""
    key = TAINT_KEY.format(check)
    taints = list(node.get("spec", {}).get("taints") or [])
    if result != ERROR:
        taints = [t for t in taints if t["key"] != key]
        taints += [{"key": key, **TAINT}] if result == FAIL else []
    return {
        "metadata": {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "labels": {RESULT_LABEL.format(check): result, TIME_LABEL.format(check): str(int(now))},
        },
        "spec": {"taints": taints or None},
    }
