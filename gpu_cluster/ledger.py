"""A run's goodput ledger (pure, standard library only): its wall time, from the JobSet's creation
to its end (its Completed or Failed condition, else now), split into buckets that sum to it, read
from the records timeline.py reads (Kueue's Workload, the pods' conditions, the namespace's
events) and the step lines in rank 0's log (`launcher.firstStepPattern`).

The start is a chain of milestones, each the later of its own time and the one before (so no
bucket is negative); the time up to a milestone goes to its bucket:

- queue wait: created -> Kueue reserved quota (QuotaReserved; else Admitted).
- capacity provisioning: -> the last admission check other than the health gate Ready (GKE's
  ProvisioningRequest), and admitted -> the last pod scheduled (nodes coming up, the scheduler).
- health gate / init: -> admitted (the node health gate's check), and scheduled -> the last
  pod's init containers done (NIC detection, GPUDirect setup).
- image pull: initialized -> the last training container started (the kubelet pulls the
  training image after the init containers).
- rendezvous: started -> rank 0's first step line.

A milestone with no record while a later one has one took no time; the time after the last one
recorded goes to the next one's bucket (a queued run's time is queue wait). A run the JobSet
restarted no longer has its earlier pods, nor rank 0's earlier log:

- earlier attempts (not on record): admitted -> the newest failure of one of the run's Jobs
  (the Job controller's failure event; once the events expired, the restarted pods' creation).
- restarts: that failure -> the restarted rank 0's first step line.

From the first step line on, the log decides (a torchrun restart line is a failure too):

- productive steps: the time up to each step line, and from the last one to the end.
- re-done steps: the time up to a step line whose number (the pattern's group `step`, else its
  first group) is at most the highest number printed before the latest failure (a restart
  repeating the steps after its newest checkpoint), and from the last step line before a failure
  to the failure (the step in flight, lost).
- restarts: a failure -> the next step line (or the end).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

from gpu_cluster.facts.kueue import JOB_COMPLETION_INDEX_ANNOTATION, JOBSET_RESTART_ATTEMPT_LABEL
from gpu_cluster.timeline import _condition, _last, _started, _time, timestamped

Object = dict[str, Any]
Bucket = Literal[
    "queue wait",
    "capacity provisioning",
    "health gate / init",
    "image pull",
    "rendezvous",
    "earlier attempts (not on record)",
    "restarts",
    "re-done steps",
    "productive steps",
]
BUCKETS: tuple[Bucket, ...] = get_args(Bucket)
# The reasons the Job controller gives a failed Job's Failed condition and its Warning event
# (kubernetes staging/src/k8s.io/api/batch/v1/types.go JobReason*, v1.35).
JOB_FAILURE_REASONS = frozenset(
    {
        "BackoffLimitExceeded",
        "DeadlineExceeded",
        "PodFailurePolicy",
        "FailedIndexes",
        "MaxFailedIndexesExceeded",
    }
)
# What torchrun's agent logs before it restarts a failed worker group (torch 2.13
# torch/distributed/elastic/agent/server/api.py SimpleElasticAgent._invoke_run), as
# scripts/run_metrics.py counts it.
TORCHRUN_RESTART = re.compile(
    r"Worker group (FAILED|UNHEALTHY)\. \d+/\d+ attempts left; will restart worker group"
)


@dataclass(frozen=True, slots=True)
class StepLine:
    at: datetime
    number: int | None


@dataclass(frozen=True)
class Ledger:
    """Seconds per bucket, in BUCKETS' order; they sum to `wall`."""

    seconds: dict[Bucket, float]
    wall: float


def split(
    chain: Sequence[tuple[Bucket, datetime | None]],
    begin: datetime,
    end: datetime,
    steps: Sequence[StepLine],
    failures: Sequence[datetime] = (),
) -> Ledger:
    """`begin` -> `end` split by the milestones of `chain` (the start, its last milestone the
    first step line), then by rank 0's later `steps` and in-log `failures` (the module's rules)."""
    seconds: dict[Bucket, float] = dict.fromkeys(BUCKETS, 0.0)
    cursor = begin

    def spend(bucket: Bucket, until: datetime) -> None:
        nonlocal cursor
        until = min(max(until, cursor), end)
        seconds[bucket] += (until - cursor).total_seconds()
        cursor = until

    recorded = [i for i, (_, at) in enumerate(chain) if at is not None]
    last_recorded = recorded[-1] if recorded else -1
    for bucket, at in chain[: last_recorded + 1]:
        if at is not None:
            spend(bucket, at)
    if last_recorded < len(chain) - 1:  # not stepping yet: the rest waits on the next milestone
        spend(chain[last_recorded + 1][0], end)
        return Ledger(seconds, (end - begin).total_seconds())
    events: list[tuple[datetime, StepLine | None]] = sorted(
        [(s.at, s) for s in steps if s.at > cursor] + [(f, None) for f in failures if f > cursor],
        key=lambda e: e[0],
    )
    numbered = [s.number for s in steps if s.at <= cursor and s.number is not None]
    highest: int | None = max(numbered, default=None)
    redo_bound: int | None = None
    failed = False
    for at, step in events:
        if step is None:
            spend("restarts" if failed else "re-done steps", at)
            failed, redo_bound = True, highest
            continue
        redone = step.number is not None and redo_bound is not None and step.number <= redo_bound
        spend("restarts" if failed else "re-done steps" if redone else "productive steps", at)
        failed = False
        if step.number is not None:
            highest = step.number if highest is None else max(highest, step.number)
    spend("restarts" if failed else "productive steps", end)
    return Ledger(seconds, (end - begin).total_seconds())


def step_lines(log: str, pattern: str) -> list[StepLine]:
    """The lines of `log` (read with timestamps) that `pattern` matches, with the step number it
    captures: its group `step`, else its first group, when that is a whole number."""
    finder = re.compile(pattern)
    found = []
    for at, text in timestamped(log):
        match = finder.search(text)
        if match is None:
            continue
        groups = match.groupdict()
        captured = groups.get("step") if "step" in groups else (match.groups() or (None,))[0]
        number = int(captured) if captured is not None and captured.isdigit() else None
        found.append(StepLine(at, number))
    return found


def torchrun_restarts(log: str) -> list[datetime]:
    return [at for at, text in timestamped(log) if TORCHRUN_RESTART.search(text)]


def _provisioned(workload: Object, health_check: str | None) -> tuple[bool, datetime | None]:
    """Whether the run waits on admission checks other than the health gate (GKE's
    ProvisioningRequest), and when the last of them answered Ready (None: one has not yet)."""
    states = [
        s
        for s in (workload.get("status") or {}).get("admissionChecks") or []
        if s.get("name") != health_check
    ]
    ready = [
        _time(s.get("lastTransitionTime")) if s.get("state") == "Ready" else None for s in states
    ]
    return bool(states), _last(ready)


def job_failures(events: Sequence[Object], run: str) -> list[datetime]:
    """When the run's Jobs (named `<run>-...` by the JobSet controller) failed, by the Job
    controller's events."""
    found = []
    for event in events:
        involved = event.get("involvedObject") or {}
        if (
            involved.get("kind") == "Job"
            and involved.get("name", "").startswith(f"{run}-")
            and event.get("reason") in JOB_FAILURE_REASONS
        ):
            at = _time(event.get("firstTimestamp") or event.get("eventTime"))
            if at is not None:
                found.append(at)
    return sorted(found)


def workload_of(workloads: Sequence[Object], job_set: Object) -> Object | None:
    """The Kueue Workload that stands for `job_set` (the one it owns)."""
    uid = job_set["metadata"].get("uid")
    for workload in workloads:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o.get("kind") == "JobSet" and o.get("uid") == uid for o in owners):
            return workload
    return None


def rank_zero(pods: Sequence[Object]) -> Object | None:
    """The newest pod of completion index 0 (a restarted run's current one), whose log the
    ledger reads."""
    ranks_zero = [
        p
        for p in pods
        if (p["metadata"].get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
    ]
    return max(ranks_zero, key=lambda p: p["metadata"]["creationTimestamp"], default=None)


def _finished(job_set: Object) -> datetime | None:
    return _condition(job_set, "Completed") or _condition(job_set, "Failed")


def ledger(
    job_set: Object,
    workload: Object | None,
    pods: Sequence[Object],
    events: Sequence[Object],
    rank_zero_log: str,
    step_pattern: str,
    health_check: str | None,
    now: datetime,
) -> Ledger:
    """The run's ledger from its JobSet, Kueue Workload, current pods, the namespace's events
    and rank 0's current log read with timestamps."""
    steps, in_log = step_lines(rank_zero_log, step_pattern), torchrun_restarts(rank_zero_log)
    return ledger_of(job_set, workload, pods, events, steps, in_log, health_check, now)


def ledger_of(
    job_set: Object,
    workload: Object | None,
    pods: Sequence[Object],
    events: Sequence[Object],
    steps: Sequence[StepLine],
    in_log: Sequence[datetime],
    health_check: str | None,
    now: datetime,
) -> Ledger:
    """ledger() with rank 0's log already read: its step lines (`steps`) and torchrun's restart
    lines' times (`in_log`), in the order printed."""
    begin = _time(job_set["metadata"]["creationTimestamp"])
    assert begin is not None
    end = _finished(job_set) or now
    first_step = steps[0].at if steps else None
    admitted = _condition(workload, "Admitted") if workload else None
    quota = (_condition(workload, "QuotaReserved") if workload else None) or admitted
    restarts = int((job_set.get("status") or {}).get("restarts") or 0)
    restarted = restarts > 0
    chain: list[tuple[Bucket, datetime | None]] = [("queue wait", quota)]
    provisions, provisioned = _provisioned(workload or {}, health_check)
    if provisions:
        chain.append(("capacity provisioning", provisioned))
    chain.append(("health gate / init", admitted))
    failures = job_failures(events, job_set["metadata"]["name"])
    if restarted:
        # The failure the current attempt restarted from: the newest before its first step.
        before = [f for f in failures if first_step is None or f <= first_step]
        created = [
            _time(p["metadata"].get("creationTimestamp"))
            for p in pods
            if (p["metadata"].get("labels") or {}).get(JOBSET_RESTART_ATTEMPT_LABEL)
            == str(restarts)
        ]
        restarted_from = before[-1] if before else min((c for c in created if c), default=now)
        chain += [("earlier attempts (not on record)", restarted_from), ("restarts", first_step)]
    else:
        chain += [
            ("capacity provisioning", _last([_condition(p, "PodScheduled") for p in pods])),
            ("health gate / init", _last([_condition(p, "Initialized") for p in pods])),
            ("image pull", _last([_started(p) for p in pods])),
            ("rendezvous", first_step),
        ]
    return split(chain, begin, end, steps, sorted([*failures, *in_log]))
