"""The goodput ledger (gpu_cluster/ledger.py) on constructed run histories: a run's objects as the
API server returns them and rank 0's log as `kubectl logs --timestamps` prints it, each bucket
worked out by hand from the history's times (seconds after the JobSet's creation). On real
nodes, with a killed rank: tests/real/test_drills.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from xml.etree import ElementTree

import pytest

from gpu_cluster.ledger import BUCKETS, Ledger, ledger, step_lines
from gpu_cluster.offline.run_ledger import svg, table_rows
from tests.test_timeline import at, check, condition

RUN = "drill"
GATE = "ns-run-node-health"
PROVISIONING = "gke-provisioning"
STEP = r"^step (\d+) loss "


def moment(seconds: int) -> datetime:
    return datetime.fromisoformat(at(seconds).replace("Z", "+00:00"))


def job_set(restarts: int = 0, completed: int | None = None) -> dict[str, Any]:
    conditions = [condition("Completed", completed)] if completed is not None else []
    return {
        "kind": "JobSet",
        "metadata": {"name": RUN, "creationTimestamp": at(0), "uid": "u"},
        "status": {"restarts": restarts, "conditions": conditions},
    }


def workload(
    quota: int | None, admitted: int | None, checks: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"jobset-{RUN}"},
        "spec": {"queueName": "q"},
        "status": {
            "conditions": [condition("QuotaReserved", quota), condition("Admitted", admitted)],
            "admissionChecks": list(checks),
        },
    }


def pod(
    created: int,
    scheduled: int,
    initialized: int | None,
    started: int | None,
    attempt: int = 0,
) -> dict[str, Any]:
    running = {"running": {"startedAt": at(started)}} if started is not None else {"waiting": {}}
    return {
        "metadata": {
            "name": f"{RUN}-workers-0-0-x{created}",
            "creationTimestamp": at(created),
            "labels": {"jobset.sigs.k8s.io/restart-attempt": str(attempt)},
        },
        "spec": {"nodeName": "node-a"},
        "status": {
            "conditions": [
                condition("PodScheduled", scheduled),
                condition("Initialized", initialized),
            ],
            "containerStatuses": [{"name": "training", "state": running}],
        },
    }


def log(*lines: tuple[int, str]) -> str:
    """Rank 0's log as `kubectl logs --timestamps` prints it (the kubelet's nanoseconds)."""
    return "".join(f"{at(s).rstrip('Z')}.123456789Z {text}\n" for s, text in lines)


def job_failed(job: str, seconds: int) -> dict[str, Any]:
    """The Job controller's Warning event on a failed Job."""
    return {
        "type": "Warning",
        "reason": "BackoffLimitExceeded",
        "firstTimestamp": at(seconds),
        "lastTimestamp": at(seconds),
        "involvedObject": {"kind": "Job", "name": job},
    }


def shown(found: Ledger) -> dict[str, float]:
    """The buckets with time in them, to the second (the log's lines are .123 s late)."""
    assert sum(found.seconds.values()) == pytest.approx(found.wall)
    assert list(found.seconds) == list(BUCKETS)
    return {b: round(s) for b, s in found.seconds.items() if round(s)}


def test_a_start_through_provisioning_and_the_health_gate_then_steps() -> None:
    checks = (check(PROVISIONING, "Ready", 70), check(GATE, "Ready", 85))
    pods = [pod(86, 90, 100, 130), pod(86, 92, 101, 131)]
    printed = log((150, "step 1 loss 2.3"), (160, "step 2 loss 2.2"), (170, "step 3 loss 2.1"))
    found = ledger(job_set(), workload(10, 86, checks), pods, [], printed, STEP, GATE, moment(200))
    assert found.wall == 200
    assert shown(found) == {
        "queue wait": 10,
        # Quota to the ProvisioningRequest's nodes (60 s), then admitted to the last pod
        # scheduled (6 s).
        "capacity provisioning": 66,
        # The gate's check to admission (16 s), then scheduled to the last init done (9 s).
        "health gate / init": 25,
        "image pull": 30,
        "rendezvous": 19,
        "productive steps": 50,
    }


def test_a_queued_run_has_waited_in_the_queue_all_along() -> None:
    found = ledger(job_set(), workload(None, None), [], [], "", STEP, GATE, moment(40))
    assert shown(found) == {"queue wait": 40}


def test_a_run_waiting_on_its_provisioning_request_waits_for_capacity() -> None:
    checks = (check(PROVISIONING, "Pending", 5), check(GATE, "Pending", 5))
    found = ledger(job_set(), workload(5, None, checks), [], [], "", STEP, GATE, moment(60))
    assert shown(found) == {"queue wait": 5, "capacity provisioning": 55}


def test_a_pod_not_started_yet_is_pulling_its_image() -> None:
    pods = [pod(0, 5, 8, None)]
    found = ledger(job_set(), workload(0, 0), pods, [], "", STEP, None, moment(50))
    assert shown(found) == {"capacity provisioning": 5, "health gate / init": 3, "image pull": 42}


def test_a_torchrun_restart_loses_the_step_in_flight_the_wait_and_the_repeated_steps() -> None:
    printed = log(
        (10, "step 1 loss 2.3"),
        (20, "step 2 loss 2.2"),
        (30, "step 3 loss 2.1"),
        (40, "step 4 loss 2.0"),
        (45, "[W] Worker group FAILED. 2/3 attempts left; will restart worker group"),
        (60, "resumed from step 2"),
        (70, "step 3 loss 2.1"),
        (80, "step 4 loss 2.0"),
        (90, "step 5 loss 1.9"),
    )
    pods = [pod(0, 1, 2, 3)]
    found = ledger(
        job_set(completed=95), workload(0, 0), pods, [], printed, STEP, None, moment(500)
    )
    # Ended when the JobSet completed, not now.
    assert found.wall == 95
    assert shown(found) == {
        "capacity provisioning": 1,
        "health gate / init": 1,
        "image pull": 1,
        "rendezvous": 7,
        # Steps 1-4 (10 -> 40), step 5 (80 -> 90) and on to the end (90 -> 95).
        "productive steps": 45,
        # Restart line -> the first step after it.
        "restarts": 25,
        # Step 4 in flight at the failure (40 -> 45), step 4 again (70 -> 80).
        "re-done steps": 15,
    }


def test_a_failure_right_after_the_first_step_has_that_step_repeated() -> None:
    printed = log(
        (10, "step 5 loss 2.3"),
        (12, "[W] Worker group FAILED. 2/3 attempts left; will restart worker group"),
        (30, "step 4 loss 2.3"),
        (40, "step 5 loss 2.2"),
        (50, "step 6 loss 2.1"),
    )
    pods = [pod(0, 0, 0, 0)]
    found = ledger(job_set(), workload(0, 0), pods, [], printed, STEP, None, moment(55))
    assert shown(found) == {
        "rendezvous": 10,
        # Step 6 in flight (10 -> 12), step 5 again (30 -> 40).
        "re-done steps": 12,
        "restarts": 18,
        "productive steps": 15,
    }


def test_a_jobset_restart_counts_from_the_jobs_failure_to_the_new_first_step() -> None:
    events = [
        job_failed(f"{RUN}-workers-0", 100),
        # Another run's Job, and a Job of this run that did not fail.
        job_failed("other-workers-0", 120),
        {
            "reason": "SuccessfulCreate",
            "firstTimestamp": at(1),
            "involvedObject": {"kind": "Job", "name": f"{RUN}-workers-0"},
        },
    ]
    printed = log((140, "step 9 loss 1.0"), (150, "step 10 loss 0.9"))
    # The new attempt's pod, and one of the first still going away.
    pods = [pod(102, 103, 110, 120, attempt=1), pod(4, 5, 6, 7, attempt=0)]
    found = ledger(
        job_set(restarts=1), workload(2, 3), pods, events, printed, STEP, None, moment(170)
    )
    assert shown(found) == {
        "queue wait": 2,
        "health gate / init": 1,
        "earlier attempts (not on record)": 97,
        "restarts": 40,
        "productive steps": 30,
    }
    # Once the events have expired: from the restarted pods' creation.
    found = ledger(job_set(restarts=1), workload(2, 3), pods, [], printed, STEP, None, moment(170))
    assert shown(found)["earlier attempts (not on record)"] == 99
    assert shown(found)["restarts"] == 38


def test_a_step_lines_number_is_its_named_group_else_its_first() -> None:
    printed = log((1, "epoch 2 step 7 loss 1.0"), (2, "loss 0.5"), (3, "epoch x step y"))
    named = step_lines(printed, r"epoch (\w+) step (?P<step>\w+)")
    assert [s.number for s in named] == [7, None]
    assert [s.number for s in step_lines(printed, r"epoch (\w+) step")] == [2, None]
    assert [s.number for s in step_lines(printed, r"loss")] == [None, None]
    (first,) = step_lines(printed, r"step 7")
    assert first.at == moment(1).replace(microsecond=123456)


def test_the_table_and_the_picture_show_each_bucket_by_its_share() -> None:
    seconds = dict.fromkeys(BUCKETS, 0.0)
    seconds.update({"queue wait": 30.0, "restarts": 20.0, "productive steps": 150.0})
    found = Ledger(seconds, 200.0)
    rows = {row[0]: row[1:] for row in table_rows(found)}
    assert rows["queue wait"] == ("30", "15.0")
    assert rows["productive steps"] == ("150", "75.0")
    assert rows["image pull"] == ("0", "0.0")
    assert rows["wall time"] == ("200", "100.0")

    drawn = ElementTree.fromstring(svg(found, "run <r>: where its time went"))
    ns = "{http://www.w3.org/2000/svg}"
    bars = {
        rect.findtext(f"{ns}title", "").split(":")[0]: float(rect.get("width", ""))
        for rect in drawn.iter(f"{ns}rect")
        if rect.find(f"{ns}title") is not None
    }
    assert list(bars) == list(BUCKETS)
    assert bars["productive steps"] == pytest.approx(5 * bars["queue wait"])
    assert bars["restarts"] == pytest.approx(2 / 3 * bars["queue wait"])
    assert bars["image pull"] == 0
    assert "run <r>: where its time went" in "".join(drawn.itertext())
