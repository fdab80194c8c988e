#!/usr/bin/env python3
"""Node health runner: runs health checks on the stack's GPU nodes and labels each node with the
result as cluster-health-scanner's checks do, for the node health gate (node_health_gate.py).

A check runs its PodTemplate's pod on one node (`gpu`: DCGM diagnostics) or, pairwise, one pod
on each of two nodes that test the fabric between them (`nccl`: the all_gather fabric check).
Each pass:
- A check Job that finished: if its pod ran on every node it checks, a pair's at the same time
  (none waited to its end for its node's GPUs, its image or its partner, none was evicted),
  its nodes get `aiinfra/<check>-healthcheck-result` (`pass`, or `fail`) and
  `aiinfra/<check>-healthcheck-runtime-sec` (now, Unix seconds); a failed node also gets the taint
  `aiinfra/<check>-healthcheck=failed:NoSchedule`, a passed one loses it. A check whose pod says
  it could not run (exit 75, EX_TEMPFAIL: no host engine, a diagnostic DCGM could not start)
  judged nothing: its nodes get the result `error`, their taints stay as they were, and they are
  checked again after the retry delay. The log names the node, the check and why it failed (the
  pods' termination messages). The Job goes. A check Job one of
  whose nodes is no longer a GPU node goes too. A node with two finished Jobs gets the second's
  result at the next pass (a node is written once a pass, at the version read).
  A pair that failed is blamed on the node under test when its partner had passed the check
  before (the reference); two untested nodes that failed together both become suspects, each
  checked next with a node that passed, as cluster-health-scanner's second pass does; when no
  node has passed (nothing to compare with), both fail.
- A node whose result is older than the recheck age (an `error`, than the retry delay), or that
  has none, that no check Job holds,
  on which no other pod of the namespace (a training pod) holds GPUs, and whose taints the
  check's pod tolerates (a node another check failed waits for that one), gets one: the
  PodTemplate's pod, required on that node (and pairwise, the partner's). The pod
  asks for the training pod's GPUs, so on a node busy with another namespace's pods it waits,
  Pending, and the node is checked when they end. Pairs: each due node with a node that passed
  while there is one free, then the other due nodes two by two, in name order.

Environment (the stack's Deployment sets it):
  HEALTH_RUNNER_NAMESPACE        the namespace of the PodTemplates and the check Jobs
  HEALTH_RUNNER_NODES            label selector of the nodes to check
  HEALTH_RUNNER_CHECKS           the checks, `<check>=<PodTemplate>` separated by spaces
  HEALTH_RUNNER_RECHECK_SECONDS  how old a result may get before the node is checked again
  HEALTH_RUNNER_RETRY_SECONDS    how old an `error` may get before the node is checked again
  HEALTH_RUNNER_POLL_SECONDS     how often it looks
  and kube_api.py's (the API server, the ServiceAccount)

Standard library only (with kube_api.py beside it): it runs in a plain Python image. Exit 78
(EX_CONFIG) when the environment is incomplete.
"""

from __future__ import annotations

import copy
import hashlib
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kube_api import CREATE, MERGE, Api, Object, every, from_env

PROGRAM = "node_health_runner"
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
BATCH = "/apis/batch/v1"


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
    error = labels.get(RESULT_LABEL.format(check)) == ERROR
    return now - ran > (runner.retry if error else runner.recheck)


def passed(labels: Mapping[str, str], check: str, now: float, runner: Runner) -> bool:
    """Whether a node labelled `labels` passed `check` within the runner's recheck age."""
    return labels.get(RESULT_LABEL.format(check)) == PASS and not due(labels, check, now, runner)


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


def could_not_run(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a pod of the check ended saying the check could not run (NOT_RUN_EXIT): then it
    judged none of its nodes, a pair's partner included."""
    return any(
        (status.get("state", {}).get("terminated") or {}).get("exitCode") == NOT_RUN_EXIT
        for pod in pods
        for status in pod.get("status", {}).get("containerStatuses", [])
    )


def why_failed(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str:
    """What the check's pods said when they ended (their termination messages, else the
    containers' or the Job's reason)."""
    said: list[str] = []
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses", []):
            ended = status.get("state", {}).get("terminated") or {}
            text = (ended.get("message") or "").strip() or ended.get("reason")
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


@dataclass
class Pass:
    """One pass of the runner: the GPU nodes and the namespace's pods as read, the nodes a check
    Job holds, the nodes written (once a pass), and the suspects the runner keeps from pass to
    pass."""

    api: Api
    runner: Runner
    now: float
    nodes: dict[str, Object]
    pods: list[Object]
    suspects: set[str]
    busy: set[str]
    written: set[str]

    def write(self, node: str, check: Check, result: str, why: str = "") -> None:
        patch = node_patch(self.nodes[node], check.name, result, self.now)
        self.api.call("PATCH", f"/api/v1/nodes/{node}", patch, content_type=MERGE)
        # The pass sees its own results: a node that passed just now is a reference for the
        # Jobs read after it.
        meta = self.nodes[node]["metadata"]
        meta["labels"] = {**meta.get("labels", {}), **patch["metadata"]["labels"]}
        self.written.add(node)
        self.suspects.discard(node)
        said = {
            FAIL: f" ({why}); tainted {TAINT_KEY.format(check.name)}",
            ERROR: f": the check could not run ({why}); not tainted for it, checked again in "
            f"{self.runner.retry} s",
        }
        print(f"{node}: {check.name}: {result}{said.get(result, '')}", flush=True)

    def passed_elsewhere(self, check: Check, nodes: Sequence[str]) -> bool:
        """Whether a GPU node besides `nodes` passed `check` lately (a reference to test with)."""
        return any(
            passed(n["metadata"].get("labels", {}), check.name, self.now, self.runner)
            for name, n in self.nodes.items()
            if name not in nodes
        )

    def record(self, check: Check, job: Mapping[str, Any], nodes: Sequence[str]) -> None:
        """Label (and taint or untaint) `nodes` with the result of their finished check `job`."""
        name = job["metadata"]["name"]
        pods = [p for p in self.pods if p["metadata"].get("labels", {}).get(JOB_NAME_LABEL) == name]
        missing = unchecked(nodes, pods)
        if missing:
            print(
                f"{', '.join(nodes)}: {check.name}: not checked ({', '.join(missing)}: the "
                "check did not run there, or not while its partner's did: its pod waited to "
                "its end, or was evicted); checked again",
                flush=True,
            )
            return
        result = outcome(job)
        if result == PASS:
            for node in nodes:
                self.write(node, check, PASS)
            return
        why = why_failed(job, pods)
        if could_not_run(pods):
            for node in nodes:
                self.write(node, check, ERROR, why)
            return
        reference = job["metadata"].get("annotations", {}).get(REFERENCE_ANNOTATION)
        if reference is None and check.paired and self.passed_elsewhere(check, nodes):
            self.suspects.update(nodes)
            print(
                f"{', '.join(nodes)}: {check.name}: failed together ({why}); each is checked "
                "again with a node that passed",
                flush=True,
            )
            return
        for node in nodes:
            if node != reference:
                self.write(node, check, FAIL, why)

    def start(self, check: Check) -> None:
        """Start `check` on the nodes due for it that it may run on now."""
        free = {n: node for n, node in self.nodes.items() if n not in self.busy}
        labels = {n: node["metadata"].get("labels", {}) for n, node in free.items()}
        due_nodes = [n for n in free if due(labels[n], check.name, self.now, self.runner)]
        if not due_nodes:
            return
        namespace = self.runner.namespace
        template = self.api.call(
            "GET", f"/api/v1/namespaces/{namespace}/podtemplates/{check.template}"
        )
        tolerations = template["template"]["spec"].get("tolerations") or []
        placeable = {n for n in free if tolerates(tolerations, free[n])}
        due_nodes = [n for n in due_nodes if n in placeable]
        if check.paired:
            good = [
                n
                for n in placeable
                if n not in self.suspects and passed(labels[n], check.name, self.now, self.runner)
            ]
            groups = pairs(due_nodes, good, self.suspects)
        else:
            groups = [(n,) for n in sorted(due_nodes)]
        jobs_path = f"{BATCH}/namespaces/{namespace}/jobs"
        for group in groups:
            reference = group[1] if check.paired and group[1] not in due_nodes else None
            job = check_job(template, group, check, self.runner, reference)
            self.api.call("POST", jobs_path, job, content_type=CREATE)
            self.busy.update(group)
            partner = f" with {reference}, which passed" if reference else ""
            print(f"{', '.join(group)}: {check.name}: checking{partner}", flush=True)


def occupied(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """The nodes on which `pods` (the namespace's: the training pods) hold GPUs, other than
    the checks' own: no check starts there while they do (a pair's pod would take one node's
    GPUs while its partner waits for the other's)."""
    found = set()
    for pod in pods:
        if CHECK_LABEL in pod["metadata"].get("labels", {}):
            continue
        if pod.get("status", {}).get("phase") not in ("Pending", "Running"):
            continue
        resources = [c.get("resources", {}) for c in pod["spec"].get("containers", [])]
        if any(GPU in r.get(k, {}) for r in resources for k in ("requests", "limits")):
            found.add(pod["spec"].get("nodeName"))
    found.discard(None)
    return found


def reconcile(api: Api, runner: Runner, now: float, suspects: set[str]) -> None:
    """One pass: record every finished check, start each check on every node that is due.
    `suspects`: nodes of failed untested pairs, kept by the caller from pass to pass."""
    nodes = {
        n["metadata"]["name"]: n
        for n in api.call("GET", "/api/v1/nodes", query={"labelSelector": runner.nodes})["items"]
    }
    suspects.intersection_update(nodes)
    pods = api.call("GET", f"/api/v1/namespaces/{runner.namespace}/pods")["items"]
    state = Pass(api, runner, now, nodes, pods, suspects, busy=occupied(pods), written=set())
    jobs_path = f"{BATCH}/namespaces/{runner.namespace}/jobs"
    for job in api.call("GET", jobs_path, query={"labelSelector": CHECK_LABEL})["items"]:
        meta = job["metadata"]
        checked = [n for n in meta.get("annotations", {}).get(NODES_ANNOTATION, "").split(",") if n]
        check = runner.check(meta.get("labels", {}).get(CHECK_LABEL, ""))
        state.busy.update(checked)
        present = bool(checked) and all(n in nodes for n in checked)
        if check is not None and present:
            if outcome(job) is None:
                continue
            if state.written.intersection(checked):
                continue  # its result at the next pass, on the node read anew
            state.record(check, job, checked)
        # Recorded, or a node of it is gone (its pod would wait for it for ever), or its check
        # is no longer run.
        api.call("DELETE", f"{jobs_path}/{meta['name']}", query={"propagationPolicy": "Background"})
    for check in runner.checks:
        state.start(check)


def checks_from(setting: str) -> tuple[Check, ...]:
    """HEALTH_RUNNER_CHECKS: `<check>=<PodTemplate>` separated by spaces, at least one."""
    checks = []
    for item in setting.split():
        name, _, template = item.partition("=")
        if not name or not template:
            raise ValueError(f"HEALTH_RUNNER_CHECKS: {item!r} is not <check>=<PodTemplate>")
        checks.append(Check(name, template))
    if not checks:
        raise ValueError("HEALTH_RUNNER_CHECKS names no check")
    return tuple(checks)


def runner_from_env(env: Mapping[str, str]) -> Runner:
    return Runner(
        namespace=env["HEALTH_RUNNER_NAMESPACE"],
        nodes=env["HEALTH_RUNNER_NODES"],
        checks=checks_from(env["HEALTH_RUNNER_CHECKS"]),
        recheck=int(env["HEALTH_RUNNER_RECHECK_SECONDS"]),
        poll=float(env["HEALTH_RUNNER_POLL_SECONDS"]),
        retry=int(env["HEALTH_RUNNER_RETRY_SECONDS"]),
    )


def main() -> None:
    runner = from_env(PROGRAM, lambda: runner_from_env(os.environ))
    api = Api.in_cluster()
    checks = ", ".join(f"{c.name} ({runner.namespace}/{c.template})" for c in runner.checks)
    print(f"{PROGRAM}: checking {checks} on nodes {runner.nodes!r}", flush=True)
    suspects: set[str] = set()
    every(PROGRAM, runner.poll, lambda: reconcile(api, runner, time.time(), suspects))


if __name__ == "__main__":
    main()
