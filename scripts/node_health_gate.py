#!/usr/bin/env python3
"""Kueue admission check controller: a run is admitted only onto nodes that passed the GPU
health checks recently.

Kueue reserves quota for a run and places it with Topology Aware Scheduling (TAS); before it
admits the run, every AdmissionCheck of the ClusterQueue must be Ready. This controller answers
the stack's node-health check: Ready when every node of the placement carries, for each check
named, cluster-health-scanner's result label `pass` and a run time within the freshness window;
else Retry (Kueue then releases the quota and tries again after the retry delay, with the nodes
TAS finds then) with a message that names each node and what it lacks. A node that failed a
check is also tainted by the checker itself, so TAS stops choosing it.

Environment (the stack's Deployment sets it):
  HEALTH_GATE_CHECK           the AdmissionCheck's name
  HEALTH_GATE_CONTROLLER      its spec.controllerName (the controller refuses another's check)
  HEALTH_GATE_NAMESPACE       the namespace whose Workloads it answers
  HEALTH_GATE_CHECKS          checks a node must pass, comma-separated (gpu, nccl, neper, ...)
  HEALTH_GATE_MAX_AGE_SECONDS how old a pass may be
  HEALTH_GATE_RETRY_SECONDS   how long Kueue waits before trying a held run again
  HEALTH_GATE_POLL_SECONDS    how often the Workloads are read
  and kube_api.py's (the API server, the ServiceAccount)

Standard library only (with kube_api.py beside it): it runs in a plain Python image. Exit 78
(EX_CONFIG) when the environment is incomplete or the AdmissionCheck names another controller.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_api import EX_CONFIG, Api, Object, every, from_env, identity, now_rfc3339

PROGRAM = "node_health_gate"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
FIELD_MANAGER = "gpu-cluster-node-health-gate"
HOSTNAME_LEVEL = "kubernetes.io/hostname"
# The labels cluster-health-scanner's checks write on each node they ran on: the result (`pass`
# or what failed) and when, in Unix seconds (GoogleCloudPlatform/cluster-health-scanner 81c525d
# src/gpu_healthcheck/gpu_healthcheck.py _RESULT_LABEL_KEY, HEALTHCHECK_TIME_LABEL_KEY;
# src/health_runner/nccl_runner.py NCCL_RESULT_KEY; src/nccl_healthcheck/nccl_startup.py).
RESULT_LABEL = "aiinfra/{}-healthcheck-result"
TIME_LABEL = "aiinfra/{}-healthcheck-runtime-sec"
PASS = "pass"
# Kueue caps an admission check's message at 32768 characters (apis/kueue/v1beta2
# workload_types.go AdmissionCheckState.Message).
MAX_MESSAGE = 32768


@dataclass(frozen=True)
class Gate:
    """The HEALTH_GATE_* settings (above), the ages and delays in seconds."""

    check: str
    controller: str
    namespace: str
    checks: tuple[str, ...]
    max_age: int
    retry: int
    poll: float


def assigned_nodes(assignment: Mapping[str, Any]) -> list[str] | None:
    """The nodes of a TAS assignment in Kueue v1beta2's compact form (apis/kueue/v1beta2
    workload_types.go TopologyAssignment, v0.15.0 to v0.19.2): the union of its slices, each
    `domainCount` domains whose value at a level is `universal` or prefix + root + suffix.
    None when the levels do not go down to the node."""
    levels = list(assignment.get("levels", []))
    if HOSTNAME_LEVEL not in levels:
        return None
    level = levels.index(HOSTNAME_LEVEL)
    nodes: list[str] = []
    for piece in assignment.get("slices", []):
        values = piece["valuesPerLevel"][level]
        if "universal" in values:
            nodes += [values["universal"]] * int(piece["domainCount"])
        else:
            individual = values["individual"]
            prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
            nodes += [f"{prefix}{root}{suffix}" for root in individual["roots"]]
    return nodes


def node_problems(
    labels: Mapping[str, str], checks: Sequence[str], now: float, max_age: int
) -> list[str]:
    """What node labels `labels` lack for the gate: per check, no result, a result that is not
    a pass, or a pass older than `max_age` seconds (or of no readable time)."""
    problems = []
    for check in checks:
        result = labels.get(RESULT_LABEL.format(check))
        if result is None:
            problems.append(f"{check}: never checked")
            continue
        if result != PASS:
            problems.append(f"{check}: {result}")
            continue
        try:
            ran = float(labels[TIME_LABEL.format(check)])
        except (KeyError, ValueError):
            problems.append(f"{check}: passed at an unknown time")
            continue
        age = now - ran
        if age > max_age:
            problems.append(f"{check}: passed {age / 3600:.1f} h ago, over {max_age / 3600:g} h")
    return problems


@dataclass(frozen=True)
class Placement:
    """Where Kueue placed a run: its nodes, and the pod sets placed without node names (a
    Topology that does not go down to the node), which the gate cannot pass."""

    nodes: tuple[str, ...]
    unnamed: tuple[str, ...]


def placement(workload: Mapping[str, Any], check: str) -> Placement | None:
    """Where Kueue placed `workload` while `check` is Pending on it with quota reserved; None
    otherwise, or while a pod set's placement is still to come (TAS delayed by another check)."""
    status = workload.get("status", {})
    states = {c["name"]: c["state"] for c in status.get("admissionChecks", [])}
    reserved = any(
        c["type"] == "QuotaReserved" and c["status"] == "True" for c in status.get("conditions", [])
    )
    if states.get(check) != "Pending" or not reserved or "admission" not in status:
        return None
    nodes: list[str] = []
    unnamed: list[str] = []
    for podset in status["admission"].get("podSetAssignments", []):
        if podset.get("delayedTopologyRequest") == "Pending":
            return None
        topology = podset.get("topologyAssignment")
        named = assigned_nodes(topology) if topology else None
        if named is None:
            unnamed.append(podset["name"])
        else:
            nodes += named
    return Placement(tuple(dict.fromkeys(nodes)), tuple(unnamed))


def decide(
    where: Placement, node_labels: Mapping[str, Mapping[str, str] | None], gate: Gate, now: float
) -> tuple[str, str]:
    """(state, message) of the check for a run placed at `where`, given each node's labels
    (None: no such node)."""
    window = f"{gate.max_age / 3600:g} h"
    problems = [f"pod set {name} placed without node names" for name in where.unnamed]
    for node in where.nodes:
        labels = node_labels.get(node)
        if labels is None:
            found = ["not in the cluster"]
        else:
            found = node_problems(labels, gate.checks, now, gate.max_age)
        if found:
            problems.append(f"{node} ({'; '.join(found)})")
    if problems:
        return "Retry", f"not healthy within {window}: {', '.join(problems)}"[:MAX_MESSAGE]
    count = len(where.nodes)
    nodes = f"{count} node{'s' if count != 1 else ''}"
    return "Ready", f"{nodes} passed {', '.join(gate.checks)} within {window}"


def activate(api: Api, gate: Gate) -> None:
    """Mark the AdmissionCheck Active (Kueue holds a ClusterQueue whose checks are not), after
    making sure it is this controller's."""
    path = f"{KUEUE}/admissionchecks/{gate.check}"
    check = api.call("GET", path)
    owner = check["spec"]["controllerName"]
    if owner != gate.controller:
        print(
            f"node_health_gate: AdmissionCheck {gate.check} is {owner!r}'s, not "
            f"{gate.controller!r}'s: not answering it",
            file=sys.stderr,
        )
        sys.exit(EX_CONFIG)
    conditions = check.get("status", {}).get("conditions", [])
    if any(c["type"] == "Active" and c["status"] == "True" for c in conditions):
        return
    active = {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": f"answered by {FIELD_MANAGER} in {gate.namespace}",
        "lastTransitionTime": now_rfc3339(),
        "observedGeneration": check["metadata"]["generation"],
    }
    api.apply_status(path, {**identity(check), "status": {"conditions": [active]}}, FIELD_MANAGER)


def node_labels(api: Api, name: str) -> dict[str, str] | None:
    node = api.get(f"/api/v1/nodes/{name}")
    if node is None:
        return None
    labels: dict[str, str] = node["metadata"].get("labels", {})
    return labels


def reconcile(api: Api, gate: Gate) -> None:
    """One pass: answer every Workload of the namespace whose check is Pending and placed."""
    activate(api, gate)
    listed = api.call("GET", f"{KUEUE}/namespaces/{gate.namespace}/workloads")
    for workload in listed["items"]:
        where = placement(workload, gate.check)
        if where is None:
            continue
        labels = {node: node_labels(api, node) for node in where.nodes}
        state, message = decide(where, labels, gate, time.time())
        entry: Object = {
            "name": gate.check,
            "state": state,
            "message": message,
            "lastTransitionTime": now_rfc3339(),
        }
        if state == "Retry":
            entry["requeueAfterSeconds"] = gate.retry
        body = {
            **identity({**workload, "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload"}),
            "status": {"admissionChecks": [entry]},
        }
        # Only onto the Workload as read: an answer for a placement Kueue has since given up
        # (evicted, the check reset to Pending) would leave the run marked Retry with no quota,
        # which Kueue never tries again (seen on the real tier). A newer one fails the apply
        # (409) and the next pass reads it again.
        body["metadata"]["resourceVersion"] = workload["metadata"]["resourceVersion"]
        name = workload["metadata"]["name"]
        path = f"{KUEUE}/namespaces/{gate.namespace}/workloads/{name}"
        api.apply_status(path, body, FIELD_MANAGER)
        print(f"{gate.namespace}/{name}: {state}: {message}", flush=True)


def gate_from_env(env: Mapping[str, str]) -> Gate:
    return Gate(
        check=env["HEALTH_GATE_CHECK"],
        controller=env["HEALTH_GATE_CONTROLLER"],
        namespace=env["HEALTH_GATE_NAMESPACE"],
        checks=tuple(c for c in env["HEALTH_GATE_CHECKS"].split(",") if c),
        max_age=int(env["HEALTH_GATE_MAX_AGE_SECONDS"]),
        retry=int(env["HEALTH_GATE_RETRY_SECONDS"]),
        poll=float(env["HEALTH_GATE_POLL_SECONDS"]),
    )


def main() -> None:
    gate = from_env(PROGRAM, lambda: gate_from_env(os.environ))
    api = Api.in_cluster()
    print(
        f"{PROGRAM}: answering {gate.check} in {gate.namespace}: {', '.join(gate.checks)}",
        flush=True,
    )
    every(PROGRAM, gate.poll, lambda: reconcile(api, gate))


if __name__ == "__main__":
    main()
