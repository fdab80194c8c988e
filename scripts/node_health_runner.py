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
  HEALTH_RUNNER_METRICS_PORT     optional: serve health_metrics.py's metrics there (/metrics):
                                 each pair's measured bus bandwidth (from its rank 0's
                                 termination message), each node's results
  and kube_api.py's (the API server, the ServiceAccount)

Standard library only (with health_check_jobs.py, its decisions, health_metrics.py and
prometheus_text.py, its metrics, and kube_api.py beside it): it runs in a plain Python image.
Exit 78 (EX_CONFIG) when the environment is incomplete.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from health_check_jobs import (
    CHECK_LABEL,
    ERROR,
    FAIL,
    GPU,
    JOB_NAME_LABEL,
    NODES_ANNOTATION,
    PASS,
    REFERENCE_ANNOTATION,
    TAINT_KEY,
    Check,
    Runner,
    check_job,
    could_not_run,
    due,
    measured_busbw,
    node_patch,
    outcome,
    pairs,
    passed,
    result_of,
    tolerates,
    unchecked,
    why_failed,
)
from health_metrics import HealthMetrics
from kube_api import CREATE, MERGE, Api, Object, every, from_env
from prometheus_text import metrics_server

PROGRAM = "node_health_runner"
BATCH = "/apis/batch/v1"


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
    metrics: HealthMetrics
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
        busbw = measured_busbw(pods) if check.paired else None
        if busbw is not None:
            self.metrics.measured(nodes, busbw, self.now)
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


def reconcile(
    api: Api, runner: Runner, now: float, suspects: set[str], metrics: HealthMetrics
) -> None:
    """One pass: record every finished check, start each check on every node that is due.
    `suspects`: nodes of failed untested pairs; `metrics`: what it measured and wrote; both
    kept by the caller from pass to pass."""
    nodes = {
        n["metadata"]["name"]: n
        for n in api.call("GET", "/api/v1/nodes", query={"labelSelector": runner.nodes})["items"]
    }
    suspects.intersection_update(nodes)
    pods = api.call("GET", f"/api/v1/namespaces/{runner.namespace}/pods")["items"]
    state = Pass(api, runner, now, nodes, pods, suspects, metrics, occupied(pods), written=set())
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
    metrics.observed(
        nodes,
        {
            (name, check.name): result
            for name, node in nodes.items()
            for check in runner.checks
            if (result := result_of(node["metadata"].get("labels", {}), check.name))
        },
    )


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
    metrics = HealthMetrics()
    port = os.environ.get("HEALTH_RUNNER_METRICS_PORT")
    if port:
        try:
            httpd = metrics_server(int(port), metrics.exposition)
        except (OSError, ValueError) as error:  # the checks matter more than their metrics
            print(f"{PROGRAM}: metrics not served on {port!r}: {error}", flush=True)
        else:
            threading.Thread(target=httpd.serve_forever, daemon=True).start()
    every(PROGRAM, runner.poll, lambda: reconcile(api, runner, time.time(), suspects, metrics))


if __name__ == "__main__":
    main()
