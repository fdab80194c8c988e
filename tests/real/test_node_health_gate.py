"""The node health gate (workload.queue.healthGate, issue #19) on the real managers: the stack's
AdmissionCheck on its ClusterQueue, answered by scripts/node_health_gate.py as the stack's
Deployment runs it (its environment as rendered), with the stack's ServiceAccount and nothing
more (a token of it, on the real API server with RBAC).

gcp-a3 as a JobSet stack, its GPU node copied into four nodes in three GCE topology blocks, only
block-2 with two; a run of two pods that must share a block can only go there. One of those two
failed cluster-health-scanner's NCCL check (labelled, not tainted, as the health runner's default
leaves it): Kueue's placement leaves it out, by the pods' node affinity, and the run waits
unplaced. Its next pass is read as 30 hours old: Kueue places the run, the gate answers Retry
naming that node and check, and Kueue takes the quota back; no pod is created. Once the pass is
fresh the next try is admitted and both pods run there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.facts.kueue import KUEUE_API
from tests.conftest import stack_context
from tests.real.cluster_state import (
    deploy_on,
    paste,
    start_on_record,
)
from tests.real.conftest import Cluster
from tests.real.queue_state import (
    admitted,
    condition,
    explain,
    requeue_time,
    run_pods,
    running,
    workload_of,
)
from tests.real.script_controllers import running_script
from tests.real.test_jobset_stack import OVERRIDES, RACK, RACKS, nodes_in_blocks
from tools.realtier.kube import Kube, wait_for
from tools.realtier.stacks import StackRender, render

pytestmark = pytest.mark.real


GATE = ("workload.queue.healthGate.enabled=true", "workload.queue.healthGate.retrySeconds=10")
HOUR = 3600


def passed(check: str, seconds_ago: int) -> dict[str, str]:
    """The labels cluster-health-scanner's `check` leaves on a node it passed `seconds_ago`
    (scripts/node_health_gate.py RESULT_LABEL, TIME_LABEL)."""
    return {
        f"aiinfra/{check}-healthcheck-result": "pass",
        f"aiinfra/{check}-healthcheck-runtime-sec": str(int(time.time()) - seconds_ago),
    }


def answering_gate(
    cluster: Cluster, stack: StackRender, tmp_path: Path
) -> contextlib.AbstractContextManager[Path]:
    """The stack's gate controller running (tests/real/script_controllers.py); yields its log."""
    return running_script(cluster, stack, f"{stack.settings.name}-node-health-gate", tmp_path)


def active(kube: Kube, check: str) -> bool:
    """Whether the gate marked its AdmissionCheck Active (Kueue admits nothing before)."""
    found = condition(kube.get(KUEUE_API, "AdmissionCheck", check), "Active")
    return found is not None and found["status"] == "True"


def check_state(kube: Kube, namespace: str, name: str, check: str) -> dict[str, Any] | None:
    workload = workload_of(kube, namespace, name)
    states = ((workload or {}).get("status") or {}).get("admissionChecks") or []
    return next((c for c in states if c["name"] == check), None)


def test_a_run_placed_on_a_node_without_a_fresh_pass_waits_until_it_passes_again(
    queued_cluster: Cluster, tmp_path: Path
) -> None:
    cluster, kube = queued_cluster, queued_cluster.kube
    stack = render("gcp-a3", (*OVERRIDES, *GATE))
    s = stack.settings
    namespace, name = s.namespace, s.name
    why = functools.partial(explain, cluster, namespace)
    # Each Retry answer makes Kueue take the quota back and requeue the run at a time it sets.
    requeued = functools.partial(requeue_time, kube, namespace, name)
    (check,) = stack.of_kind("AdmissionCheck")
    check_name = check["metadata"]["name"]
    (queue,) = stack.of_kind("ClusterQueue")
    assert queue["spec"]["admissionChecksStrategy"]["admissionChecks"] == [{"name": check_name}]

    fresh = {**passed("gpu", HOUR), **passed("nccl", HOUR)}
    # As the health runner leaves a node that failed NCCL with its default DRY_RUN: labelled,
    # not tainted.
    failed_nccl = {**fresh, "aiinfra/nccl-healthcheck-result": "fail"}
    nodes = [
        dataclasses.replace(n, labels={**n.labels, **(failed_nccl if n.name == "gpu-2" else fresh)})
        if n.name.startswith("gpu-")
        else n
        for n in nodes_in_blocks(stack)
    ]
    deploy_on(kube, nodes, stack)
    with answering_gate(cluster, stack, tmp_path) as log:
        wait_for(
            "the AdmissionCheck Active", lambda: active(kube, check_name), explain=log.read_text
        )
        # gpu-2 failed NCCL: placement passes it over (the pods ask for nodes whose checks last
        # passed), and no block has two such nodes: the run waits, unplaced, never asked.
        wait_for(
            "Kueue finding no place",
            lambda: (
                (w := workload_of(kube, namespace, name)) is not None
                and (c := condition(w, "QuotaReserved")) is not None
                and c["status"] == "False"
                # Kueue's words: one node of the four left out by the pods' affinity.
                and "fit only 1 out of 2 pod(s)" in c["message"]
                and "excluded: affinity: 1" in c["message"]
            ),
            explain=lambda: log.read_text() + why(),
        )
        assert ": Retry: " not in log.read_text()
        # The runner checks gpu-2 again and it passes, but its pass is read as 30 hours old.
        kube.merge_patch(
            "v1", "Node", "gpu-2", None, {"metadata": {"labels": passed("nccl", 30 * HOUR)}}
        )
        # Placed in block-2 (gpu-1, gpu-2), answered Retry for gpu-2's NCCL pass: Kueue takes
        # the quota back and tries again, each try counted.
        wait_for(
            "the run held twice",
            lambda: (
                (c := check_state(kube, namespace, name, check_name)) is not None
                and int(c.get("retryCount") or 0) >= 2
            ),
            explain=lambda: log.read_text() + why(),
            scheduled=requeued,
        )
        held = [line for line in log.read_text().splitlines() if ": Retry: " in line]
        assert held, log.read_text()
        assert held[0].endswith(
            "not healthy within 24 h: gpu-2 (nccl: passed 30.0 h ago, over 24 h)"
        ), held
        assert admitted(kube, namespace, name) is None
        # Kueue's eviction quotes the answer where `kubectl describe workload` shows it.
        said = [e["message"] for e in kube.list("v1", "Event", namespace)]
        assert any("gpu-2 (nccl: passed 30.0 h ago, over 24 h)" in m for m in said), said
        assert run_pods(kube, namespace, name) == []

        # The pass is fresh: the next try is admitted.
        kube.merge_patch("v1", "Node", "gpu-2", None, {"metadata": {"labels": passed("nccl", 60)}})
        wait_for(
            "the run admitted",
            functools.partial(admitted, kube, namespace, name),
            explain=lambda: log.read_text() + why(),
            # A try already under way when the pass turned fresh is answered Retry first, and
            # Kueue then waits out that eviction's backoff (CI at 5007675 gave up at 180 s).
            scheduled=requeued,
        )
        state = check_state(kube, namespace, name, check_name)
        assert state is not None and state["state"] == "Ready", state
        assert state["message"] == "2 nodes passed gpu, nccl within 24 h"
        pods = wait_for(
            "both pods running",
            functools.partial(running, kube, namespace, name, s.nodes),
            explain=why,
        )
        assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-1", "gpu-2"]
        # The start's timeline shows when the gate let it through, before Kueue admitted it.
        printed = paste(
            cluster, tmp_path, stack_context("gcp-a3"), stack.run.outputs["timelineCommand"]
        )
        assert "health gate" in start_on_record(printed), printed


def test_on_openshift_the_gate_runs_unqueued_beside_red_hat_s_kueue_and_holds_an_unchecked_host(
    openshift_queued_cluster: Cluster, tmp_path: Path
) -> None:
    """nerc-production as a JobSet stack in a namespace it creates (opted in to Red Hat's Kueue),
    placed by the racks it names, behind the gate: the gate's own pod is not queued by Kueue
    (no queue name: Red Hat's default label policy); a host that was never checked is left out,
    so the one rack with two GPU hosts has room only once it passes."""
    cluster, kube = openshift_queued_cluster, openshift_queued_cluster.kube
    stack = render(
        "nerc-production",
        (
            "workload.kind=jobset",
            "workload.command[0]=/workspace/train.py",
            "namespaceMode=create",
            f"workload.queue.topologyLevels[0]={RACK}",
            *GATE,
        ),
    )
    s = stack.settings
    namespace, name = s.namespace, s.name
    why = functools.partial(explain, cluster, namespace)
    (check,) = stack.of_kind("AdmissionCheck")
    (host, *_) = stack.nodes()
    healthy = {**passed("gpu", HOUR), **passed("nccl", HOUR)}
    nodes = [
        dataclasses.replace(
            host,
            name=node_name,
            labels={**host.labels, RACK: rack, **({} if node_name == "gpu-b2" else healthy)},
        )
        for node_name, rack in RACKS.items()
    ]
    deploy_on(kube, nodes, stack)

    # The gate's Deployment runs its pod as is: Kueue manages the opted-in namespace's jobs
    # that name a queue, and the gate names none.
    gate_pods = wait_for(
        "the gate's pod running",
        lambda: (
            [
                p
                for p in kube.list("v1", "Pod", namespace)
                if p["metadata"]["name"].startswith(f"{name}-node-health-gate-")
                and (p.get("status") or {}).get("phase") == "Running"
            ]
            or None
        ),
        explain=why,
    )
    assert not gate_pods[0]["spec"].get("schedulingGates"), gate_pods[0]["spec"]
    with answering_gate(cluster, stack, tmp_path) as log:
        wait_for("the AdmissionCheck Active", lambda: active(kube, check["metadata"]["name"]))
        wait_for(
            "Kueue finding no rack with room",
            lambda: (
                (w := workload_of(kube, namespace, name)) is not None
                and (c := condition(w, "QuotaReserved")) is not None
                and "excluded: affinity: 1" in c["message"]
            ),
            explain=lambda: log.read_text() + why(),
        )
        kube.merge_patch("v1", "Node", "gpu-b2", None, {"metadata": {"labels": healthy}})
        wait_for(
            "the run admitted",
            functools.partial(admitted, kube, namespace, name),
            explain=lambda: log.read_text() + why(),
        )
        pods = wait_for(
            "its pods running",
            functools.partial(running, kube, namespace, name, s.nodes),
            explain=why,
        )
        assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-b1", "gpu-b2"]
        assert (
            log.read_text()
            .splitlines()[-1]
            .endswith(": Ready: 2 nodes passed gpu, nccl within 24 h")
        )
