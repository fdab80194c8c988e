"""The start timeline (gpu_cluster/timeline.py) on a run's objects as the API server returns
them: each phase is when the last pod (or node) got there, '-' until all have, and the command
line it takes. On the real API server with the real kubectl: tests/real/test_jobset_stack.py and
test_stacks_come_up.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from gpu_cluster import timeline
from gpu_cluster.timeline import PHASES, Run, phases, table

T0 = "2026-11-24T06:00:00Z"


def at(seconds: int) -> str:
    return f"2026-11-24T06:{seconds // 60:02d}:{seconds % 60:02d}Z"


def condition(kind: str, seconds: int | None) -> dict[str, Any]:
    if seconds is None:
        return {"type": kind, "status": "False", "lastTransitionTime": T0}
    return {"type": kind, "status": "True", "lastTransitionTime": at(seconds)}


def pod(name: str, scheduled: int, initialized: int | None, started: int | None) -> dict[str, Any]:
    running = {"running": {"startedAt": at(started)}} if started is not None else {"waiting": {}}
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": f"node-{name}"},
        "status": {
            "conditions": [
                condition("PodScheduled", scheduled),
                # The kubelet made the sandbox 4 s after the pod was scheduled.
                condition("PodReadyToStartContainers", scheduled + 4),
                condition("Initialized", initialized),
                condition("Ready", started + 5 if started is not None else None),
            ],
            "containerStatuses": [
                {"name": "rxdm", "state": {"running": {"startedAt": at(1)}}},
                {"name": "training", "state": running},
            ],
        },
    }


def pulled(pod_name: str, seconds: int, container: str = "training") -> dict[str, Any]:
    return {
        "reason": "Pulled",
        "lastTimestamp": at(seconds),
        "involvedObject": {"name": pod_name, "fieldPath": f"spec.containers{{{container}}}"},
    }


def agent(node: str, ready: int | None) -> dict[str, Any]:
    """A node agent's pod (a GPUDirect installer, the image pre-pull) on `node`."""
    return {"spec": {"nodeName": node}, "status": {"conditions": [condition("Ready", ready)]}}


GATE = "ns-run-node-health"


def check(name: str, state: str, seconds: int) -> dict[str, Any]:
    """An admission check's state on a Workload, as Kueue keeps it."""
    return {"name": name, "state": state, "lastTransitionTime": at(seconds), "message": ""}


def run(
    pods: list[dict[str, Any]],
    kind: str = "JobSet",
    agents: list[dict[str, Any]] | None = None,
    health_check: str | None = GATE,
    checks: tuple[dict[str, Any], ...] = (check(GATE, "Ready", 2),),
) -> Run:
    return Run(
        controller={"kind": kind, "metadata": {"creationTimestamp": at(0), "uid": "u"}},
        workloads=[
            {"status": {"conditions": [condition("Admitted", 3)], "admissionChecks": list(checks)}}
        ],
        pods=pods,
        nodes=[
            {
                "metadata": {"name": p["spec"]["nodeName"]},
                "status": {"conditions": [condition("Ready", 30)]},
            }
            for p in pods
        ],
        events=[pulled("a", 40), pulled("b", 55), pulled("b", 50, "rxdm")],
        agents=agents,
        health_check=health_check,
    )


def test_each_phase_is_when_the_last_pod_got_there() -> None:
    agents = [agent("node-a", 20), agent("node-a", 32), agent("node-b", 31)]
    r = run([pod("a", 31, 60, 61), pod("b", 33, 70, 72)], agents=agents)._replace(
        asked_first_step=True, first_step=timeline._time(at(90))
    )
    found = {p.name: p.at for p in phases(r)}
    assert tuple(found) == PHASES
    submitted = found["submitted"]
    assert submitted is not None
    seconds = {name: int((t - submitted).total_seconds()) for name, t in found.items() if t}
    assert seconds == {
        "submitted": 0,
        "health gate": 2,
        "admitted": 3,
        "nodes ready": 30,
        "agents ready": 32,  # the last agent on the last node
        "scheduled": 33,
        "sandbox ready": 37,
        "image pulled": 55,  # the training container's pull, not the sidecar's
        "initialized": 70,
        "started": 72,
        "ready": 77,
        "first step": 90,
    }


def test_the_health_gate_is_when_its_check_answered_ready() -> None:
    pods = [pod("a", 31, 60, 61)]
    # Held once (Retry), then found healthy: the Ready answer counts, not another check's.
    held = (check("provisioning", "Ready", 1), check(GATE, "Pending", 4))
    found = {p.name: p.at for p in phases(run(pods, checks=held))}
    assert found["health gate"] is None
    passed = (check("provisioning", "Ready", 1), check(GATE, "Ready", 9))
    found = {p.name: p.at for p in phases(run(pods, checks=passed))}
    submitted = found["submitted"]
    assert submitted is not None and found["health gate"] == submitted + timedelta(seconds=9)
    # A run without the gate shows no such phase.
    assert "health gate" not in {p.name for p in phases(run(pods, health_check=None))}


def test_a_phase_waits_for_every_pod() -> None:
    found = {p.name: p.at for p in phases(run([pod("a", 31, 60, 61), pod("b", 33, None, None)]))}
    assert found["scheduled"] is not None
    assert found["initialized"] is None and found["started"] is None and found["ready"] is None
    lines = table(run([pod("a", 31, 60, 61), pod("b", 33, None, None)])).splitlines()
    assert lines[-2].split() == ["ready", "-", "-"]
    assert lines[-1] == "(2 pods; '-': not there yet, or not recorded)"


def test_a_stateful_set_has_no_admission_and_no_pods_has_no_phases() -> None:
    r = run([], kind="StatefulSet")
    found = {p.name: p.at for p in phases(r)}
    assert "admitted" not in found
    assert [name for name, t in found.items() if t is not None] == ["submitted"]


def test_agents_count_only_on_the_runs_nodes_and_on_every_one_of_them() -> None:
    pods = [pod("a", 31, 60, 61), pod("b", 33, 70, 72)]
    elsewhere = agent("node-c", 99)
    found = {p.name: p.at for p in phases(run(pods, agents=[agent("node-a", 20), elsewhere]))}
    assert found["agents ready"] is None  # node-b has no agent Ready yet
    found = {
        p.name: p.at for p in phases(run(pods, agents=[agent("node-a", 20), agent("node-b", None)]))
    }
    assert found["agents ready"] is None
    both = [agent("node-a", 20), agent("node-b", 25), elsewhere]
    found = {p.name: p.at for p in phases(run(pods, agents=both))}
    submitted = found["submitted"]
    assert submitted is not None
    assert found["agents ready"] == submitted + timedelta(seconds=25)
    # A stack without node agents shows no such phase.
    assert "agents ready" not in {p.name for p in phases(run(pods))}


def test_the_table_counts_from_submission() -> None:
    lines = table(run([pod("a", 31, 60, 61)])).splitlines()
    assert lines[0].split() == ["phase", "at", "(UTC)", "since", "submitted"]
    assert lines[1].split() == ["submitted", "2026-11-24", "06:00:00", "0", "s"]
    assert lines[2].split() == ["health", "gate", "2026-11-24", "06:00:02", "2", "s"]
    assert lines[4].split() == ["nodes", "ready", "2026-11-24", "06:00:30", "30", "s"]


@pytest.mark.parametrize(
    "argv",
    [
        ["kubectl", "ns", "jobset"],  # too few
        ["kubectl", "--context", "c", "ns", "job", "name"],  # not a kind
        ["kubectl", "ns", "jobset", "name"],  # no cluster named
        ["kubectl", "--cluster", "c", "ns", "jobset", "name"],  # a cluster alone names none
        ["kubectl", "--context", "c", "--agents", "kube-system", "ns", "jobset", "name"],
        ["kubectl", "--context", "c", "--health-check", "ns", "jobset", "name"],  # no check
        ["kubectl", "--context", "c", "--first-step", "ns", "jobset", "name"],  # no pattern
        ["kubectl", "--context", "c", "--first-step", "(", "ns", "jobset", "name"],  # not a regex
    ],
)
def test_usage_errors_exit_2_before_calling_the_cli(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert timeline.main(argv) == 2
    assert capsys.readouterr().err


def test_the_first_step_is_the_first_line_the_pattern_finds_in_the_text() -> None:
    log = (
        "2026-11-24T06:01:00.000000001Z step 10 of the warm-up\n"
        "2026-11-24T06:01:07.123456789Z step 1 loss 11.0\n"
        "2026-11-24T06:01:09.000000000Z step 1 loss 10.8\n"
    )
    found = timeline.first_step_at(log, r"^step 1\b")
    assert found is not None
    assert found.isoformat() == "2026-11-24T06:01:07.123456+00:00"
    # The timestamp is not the text: a pattern for a time matches nothing there.
    assert timeline.first_step_at(log, r"06:01") is None
    assert timeline.first_step_at("", r"^step 1\b") is None


def test_the_first_step_shows_only_when_asked_and_is_read_from_pod_0() -> None:
    pods = [pod("a", 31, 60, 61), pod("b", 33, 70, 72)]
    asked = run(pods)._replace(asked_first_step=True, first_step=timeline._time(at(90)))
    found = {p.name: p.at for p in phases(asked)}
    assert list(found)[-1] == "first step" and found["first step"] == timeline._time(at(90))
    assert "first step" not in {p.name for p in phases(run(pods))}
    # Rank 0: the indexed Job's pod of index 0, or the StatefulSet's ordinal 0.
    indexed = [
        {
            "metadata": {
                "name": f"run-node-0-{i}-x",
                "annotations": {"batch.kubernetes.io/job-completion-index": str(i)},
            }
        }
        for i in (1, 0)
    ]
    assert timeline._pod_zero(indexed) == indexed[1]
    ordinals = [{"metadata": {"name": n}} for n in ("train-10", "train-0")]
    assert timeline._pod_zero(ordinals) == ordinals[1]
