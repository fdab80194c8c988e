"""Priorities and preemption in a JobSet stack's queue (issue #40): the ClusterQueue's
`preemption.withinClusterQueue`, the WorkloadPriorityClasses the stack offers, and a submitted
run's priority class, as rendered and as `gpu-cluster run submit` fills a run in.

Kueue evicting a lower-priority run for a higher one on the real managers, and the evicted run
resuming from its checkpoint: tests/real/test_drills.py."""

from __future__ import annotations

import pytest

from gpu_cluster.offline.engine import ProgramRun
from gpu_cluster.plan.run_template import RunRequest, RunRequestError, fill
from tests.conftest import manifests, one, run_stack
from tests.test_run_template import JOBSET, template_of

CLASSES = (
    "workload.queue.priorityClasses[0].name=research",
    "workload.queue.priorityClasses[0].value=100",
    "workload.queue.priorityClasses[1].name=production",
    "workload.queue.priorityClasses[1].value=1000",
)
PREEMPTING = (*JOBSET, *CLASSES, "workload.queue.preemption=LowerPriority")
# The label Kueue reads a job's priority class from (kueue v0.19.2
# pkg/controller/constants/constants.go WorkloadPriorityClassLabel).
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def priority_classes(run: ProgramRun) -> dict[str, int]:
    return {m["metadata"]["name"]: m["value"] for m in manifests(run, "WorkloadPriorityClass")}


def test_the_stack_creates_its_classes_and_lets_a_higher_run_evict_a_lower_one() -> None:
    run = run_stack("nerc-production", *PREEMPTING)
    assert priority_classes(run) == {"research": 100, "production": 1000}
    spec = one(run, "ClusterQueue")["spec"]
    assert spec["preemption"] == {"withinClusterQueue": "LowerPriority"}


def test_by_default_the_queue_preempts_nothing_and_offers_no_class() -> None:
    run = run_stack("nerc-production", *JOBSET)
    assert "preemption" not in one(run, "ClusterQueue")["spec"]
    assert priority_classes(run) == {}
    _, params = template_of(run)
    assert params.priority_classes == ()


def test_a_referenced_queue_s_classes_are_offered_not_created() -> None:
    run = run_stack("nerc-production", *JOBSET, *CLASSES, "workload.queue.mode=reference")
    assert priority_classes(run) == {}
    _, params = template_of(run)
    assert params.priority_classes == ("research", "production")


def test_a_run_asks_for_a_class_by_kueue_s_label_and_none_without_one() -> None:
    template, params = template_of(run_stack("nerc-production", *PREEMPTING))
    urgent = fill(template, params, RunRequest("urgent", priority="production"), "t")
    assert urgent["metadata"]["labels"][KUEUE_PRIORITY_LABEL] == "production"
    plain = fill(template, params, RunRequest("plain"), "t")
    assert KUEUE_PRIORITY_LABEL not in plain["metadata"]["labels"]


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (PREEMPTING, "--priority urgent: .* it offers research, production; nothing was created"),
        (JOBSET, "--priority urgent: .* it offers none \\(workload.queue.priorityClasses\\)"),
    ],
)
def test_an_unknown_class_is_refused_with_the_stack_s_list(
    overrides: tuple[str, ...], named: str
) -> None:
    template, params = template_of(run_stack("nerc-production", *overrides))
    with pytest.raises(RunRequestError, match=named):
        fill(template, params, RunRequest("r", priority="urgent"), "t")
