"""Failure drills on two real nodes (issue #40): a run a person submitted with `gpu-cluster run
submit` trains examples/checkpointing/train.py, saving every SAVE_EVERY steps in the
CHECKPOINT_DIR the submit gave it on the shared workspace claim (tests/real/drills.py).

- One rank's training process killed (SIGKILL, as the OOM killer ends it): the JobSet restarts
  the run, whose new pods resume from the newest complete checkpoint, losing at most the steps
  since it.
- A pod deleted (SIGTERM and its grace period, as a drain or `kubectl delete pod` ends it): the
  script saves on SIGTERM, so the restarted run resumes where it stopped and loses no step.

- A node made unusable (tainted NoExecute, as a failing node is drained): a run on one node,
  submitted with `--nodes 1` so that the other is the spare, is evicted (SIGTERM: it saves), and
  the restarted run is scheduled on the spare and resumes where it stopped.

After the kill, the run's goodput ledger (`gpu-cluster run status`) counts the restart as the
drill timed it, and the stack's ledger exporter (scripts/run_ledger.py, with its own
ServiceAccount's rights) serves the same ledger to a real Prometheus. Each drill's recovery
time is a measurement (bench/recovery.py prints them), never asserted.

- Preempted (tests/real/preemption.py): the stack's queue has `workload.queue.preemption:
  LowerPriority` and two priority classes, `low` and `high` (the drills above run on it too, as
  bench/recovery.py runs them all). A `--priority low` run saves; a `--priority high` run
  submitted to the same queue (the quota holds one) makes Kueue evict the low one, whose pods
  get SIGTERM and save the step they stopped at; the high run steps and is stopped with
  `gpu-cluster run stop`; Kueue admits the low run again and it resumes from the step it saved,
  losing none. A class the stack does not offer is refused, and nothing is created.

Not shown: a node that stops answering (kubelet gone): the node controller taints it unreachable
only after its grace period, and pods tolerate that for 300 s (DefaultTolerationSeconds), so
what follows is this drill's, minutes later."""

from __future__ import annotations

import contextlib
import math
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpu_cluster.facts.kueue import JOBSET_API
from gpu_cluster.ledger import BUCKETS
from gpu_cluster.plan.dashboard import dashboard_rows
from tests.conftest import ROOT, stack_context
from tests.real.cluster_state import paste
from tests.real.conftest import RealCluster
from tests.real.drills import (
    RUN,
    SAVE_EVERY,
    SCRIPT,
    STACK,
    STEP_LINE,
    cli_command,
    delete_pod,
    drill,
    drill_config,
    ledger_seconds,
    node_drill,
    provide_stack,
    run_command,
    run_status,
    submit_run,
)
from tests.real.preemption import HIGH, LOW, PRIORITIES, preemption_drill
from tests.real.prometheus import (
    lint_findings,
    pod_monitor_scrape,
    query,
    running_prometheus,
    targets,
    value_of,
)
from tests.real.script_controllers import running_script
from tests.real.training import kill_worker, training_cluster
from tests.script_modules import load_script
from tests.test_run_metrics import scrape
from tools.realtier.build import Tools
from tools.realtier.controlplane import free_port
from tools.realtier.images import NodeImages
from tools.realtier.kube import wait_for
from tools.realtier.stacks import StackRender, render

pytestmark = pytest.mark.real
# A bucket as the ledger exporter labels it.
label = load_script("run_ledger").bucket_label
# The PodMonitor of the run's pods (components/metrics_scrape.py names it <name>-metrics).
MONITOR = "ml-dev-env-metrics"
SVG = "{http://www.w3.org/2000/svg}"
# The steps (0.5 s each) the resumed run takes before the dashboard is drawn.
DRAWN_STEPS = 40


@pytest.fixture
def config(node_images: NodeImages) -> tuple[str, ...]:
    found = drill_config(node_images)
    if not found:
        pytest.skip("training image not built: run `python -m tools.realtier build`")
    return (*found, *PRIORITIES)


@pytest.fixture
def stack(config: tuple[str, ...]) -> StackRender:
    return render(STACK, config)


@pytest.fixture
def nodes(
    tools: Tools, node_images: NodeImages, stack: StackRender, tmp_path: Path
) -> Iterator[RealCluster]:
    """The two real nodes with the stack's objects but its own run, its claims' volumes under
    tmp_path/volumes."""
    with training_cluster(tools, node_images, stack, tmp_path, queued=True) as cluster:
        provide_stack(cluster, stack, tmp_path / "volumes")
        yield cluster


@dataclass(frozen=True)
class Watching:
    """A real Prometheus (its URL) scraping the drill's run as the platform would: its pods as
    the stack's PodMonitor selects them, and the stack's ledger exporter (its port)."""

    prometheus: str
    exporter_port: int
    started: float  # Unix time


@contextlib.contextmanager
def watching(
    tools: Tools, cluster: RealCluster, stack: StackRender, tmp_path: Path
) -> Iterator[Watching]:
    """The ledger exporter run as a process with its Deployment's environment and its
    ServiceAccount's token, and Prometheus in the first node's network namespace, where the
    pods' addresses are routed: it finds the run's pods through the API as the PodMonitor
    says (tests/real/prometheus.py pod_monitor_scrape) and reaches the exporter at this host's
    address on the nodes' LAN."""
    network = cluster.nodes.network
    port = free_port()
    exporter = f"{stack.settings.name}-run-ledger"
    env = {"RUN_LEDGER_METRICS_PORT": str(port), "PYTHONPATH": str(ROOT)}
    (monitor,) = (m for m in stack.of_kind("PodMonitor") if m["metadata"]["name"] == MONITOR)
    scrapes = [
        pod_monitor_scrape(monitor, cluster.kubeconfig),
        {"job_name": "ledger", "static_configs": [{"targets": [f"{network.gateway}:{port}"]}]},
    ]
    with (
        running_script(cluster, stack, exporter, tmp_path, env),
        running_prometheus(
            tools,
            tmp_path / "prometheus",
            scrapes,
            host=network.node_ip(0),
            enter=lambda command: network.enter(0, command),
        ) as prometheus,
    ):
        yield Watching(prometheus, port, time.time())


def exported_ledger(tools: Tools, watched: Watching, since: float) -> dict[str, float]:
    """The drill run's ledger as the real Prometheus scraped it from the stack's exporter, once
    the exporter's wall time has reached `since` (the exporter, running all along, serves what
    its last pass found): seconds per bucket (as run status names them) and the wall time. Its
    exposition passes promtool."""
    prometheus = watched.prometheus
    wall = f'gpu_cluster_run_wall_seconds{{run="{RUN}"}}'
    wait_for(
        "the exporter's ledger scraped",
        lambda: (value_of(prometheus, wall) or 0) >= since,
        explain=lambda: str(query(prometheus, "up")),
    )
    served: dict[str, float | None] = {
        bucket: value_of(
            prometheus,
            f'gpu_cluster_run_ledger_seconds{{run="{RUN}", bucket="{label(bucket)}"}}',
        )
        for bucket in BUCKETS
    }
    served["wall time"] = value_of(prometheus, wall)
    exposition = scrape(watched.exporter_port)
    assert exposition is not None and lint_findings(tools, exposition) == ""
    assert all(value is not None for value in served.values()), served
    return {bucket: float(value or 0) for bucket, value in served.items()}


def drawn_dashboard(
    cluster: RealCluster, config: tuple[str, ...], watched: Watching, tmp_path: Path
) -> ET.Element:
    """`gpu-cluster dashboard --svg`, as a user pastes it on the stack's context, of the stack's
    dashboard from the real Prometheus since it started; the picture, parsed."""
    picture = tmp_path / "dashboard.svg"
    since = f"{math.ceil(time.time() - watched.started)}s"
    flags = ("--prometheus", watched.prometheus, "--svg", str(picture), "--since", since)
    printed = paste(
        cluster, tmp_path, stack_context(STACK), cli_command(config, "dashboard", args=flags)
    )
    assert f"wrote {picture}" in printed, printed
    return ET.fromstring(picture.read_text())


def lines_by_panel(root: ET.Element) -> dict[str, list[str]]:
    """Each panel's title -> the legend names of the lines drawn in it."""
    found: dict[str, list[str]] = {}
    title = ""
    for element in root.iter():
        if element.tag == f"{SVG}text" and element.get("font-weight") == "bold":
            title = element.text or ""
            found.setdefault(title, [])
        elif element.tag == f"{SVG}polyline":
            found[title].append(element.findtext(f"{SVG}title") or "")
    return found


def test_a_run_resumes_from_its_checkpoints_after_a_killed_rank_a_deleted_pod_and_a_lost_node(
    tools: Tools,
    nodes: RealCluster,
    stack: StackRender,
    config: tuple[str, ...],
    tmp_path: Path,
) -> None:
    cluster, namespace = nodes, stack.settings.namespace
    printed = submit_run(cluster, config, tmp_path)
    assert f"CHECKPOINT_DIR=/workspace/checkpoints/{RUN}" in printed, printed
    with watching(tools, cluster, stack, tmp_path) as watched:
        killed_rank_drill(tools, cluster, stack, config, watched, tmp_path)

        deleted = drill(cluster, namespace, "pod deleted", lambda pod: delete_pod(cluster, pod))
        # Saved on SIGTERM: the run resumes at or after the last step seen, nothing lost.
        assert deleted.resumed_from >= deleted.last_before, deleted

        # The dashboard over what Prometheus scraped from the pods and the exporter through both
        # restarts, once the resumed run has stepped a while (the drills act a few steps into
        # each attempt): every panel of the runs' and goodput rows, and the GPUs each run
        # holds, draws the run; DCGM's and Kueue's panels have nothing here.
        stepped = f'max(gpu_cluster_run_steps_total{{run="{RUN}"}})'
        wait_for(
            f"{DRAWN_STEPS} steps of the resumed run scraped",
            lambda: (value_of(watched.prometheus, stepped) or 0) >= DRAWN_STEPS,
        )
        rows = {r.title: r for r in dashboard_rows(stack.settings)}
        shown = lines_by_panel(drawn_dashboard(cluster, config, watched, tmp_path))
        scraped = targets(watched.prometheus)
        for panel in (*rows["Training runs"].panels, *rows["Goodput"].panels):
            assert shown[panel.title], (panel, shown, scraped)
            assert all(RUN in name for name in shown[panel.title]), (panel, shown)
        assert set(shown["GPUs held per run"]) == {RUN}, shown

    paste(cluster, tmp_path, stack_context(STACK), run_command(config, "stop", RUN))
    moved = node_drill(cluster, namespace, config, tmp_path)
    assert moved.now_on != moved.lost, moved
    # Evicted with SIGTERM and its grace period: saved, nothing lost.
    assert moved.recovery.resumed_from >= moved.recovery.last_before, moved


def killed_rank_drill(
    tools: Tools,
    cluster: RealCluster,
    stack: StackRender,
    config: tuple[str, ...],
    watched: Watching,
    tmp_path: Path,
) -> None:
    """A rank killed: the run resumes from its newest checkpoint; its ledger, in run status and
    as the exporter serves it, counts the restart."""
    namespace, volumes = stack.settings.namespace, tmp_path / "volumes"
    killed = drill(cluster, namespace, "rank killed", lambda pod: kill_worker(cluster, pod, SCRIPT))
    # The newest complete save at the kill: the last multiple of SAVE_EVERY rank 0 had reached
    # (it may have gone on a step or two after it was last seen).
    assert killed.resumed_from % SAVE_EVERY == 0, killed
    assert killed.resumed_from >= killed.last_before - killed.last_before % SAVE_EVERY, killed
    # On the claim, where the submit said: complete step-<n> directories.
    saved = volumes / "ml-dev-env-workspace" / "checkpoints" / RUN
    assert [d for d in saved.glob("step-*") if (d / "COMPLETE").is_file()], saved
    # Its goodput ledger (`run status --svg`): its buckets sum to its wall time (each shown to
    # the second); the restart, from the failed Job's event to the new rank 0's first step, is
    # the kill to that step (what the drill measured) within 30 s: after the kill, torchrun,
    # the pod and the Job controller notice it, the Job's failure is recorded once its pods
    # have ended, and the drill sees the step a poll late (10 s in all, measured here).
    picture = tmp_path / "ledger.svg"
    printed = run_status(cluster, config, tmp_path, picture)
    # The current pods' start, to their first step, and the last step rank 0 printed.
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert re.search(rf"^first step +{stamp} +\d+ s$", printed, re.M), printed
    assert re.search(rf"^last step: {STEP_LINE[1:]}", printed, re.M), printed
    spent = ledger_seconds(printed)
    wall = spent.pop("wall time")
    assert sum(spent.values()) == pytest.approx(wall, abs=len(spent)), spent
    assert killed.seconds - 30 <= spent["restarts"] <= killed.seconds + 1, (killed, spent)
    assert spent["earlier attempts (not on record)"] > 0 and spent["productive steps"] > 0, spent
    assert picture.read_text().count("<title>") == len(spent), picture.read_text()
    served = exported_ledger(tools, watched, since=wall)
    # The buckets the restart closed, as run status printed them (to the second).
    for bucket in ("earlier attempts (not on record)", "restarts", "queue wait"):
        assert served[bucket] == pytest.approx(spent[bucket], abs=1), (bucket, served, spent)
    assert sum(v for k, v in served.items() if k != "wall time") == pytest.approx(
        served["wall time"], abs=0.01
    )


def test_a_preempted_run_saves_and_resumes_where_it_stopped_once_admitted_again(
    nodes: RealCluster, stack: StackRender, config: tuple[str, ...], tmp_path: Path
) -> None:
    cluster, namespace = nodes, stack.settings.namespace
    volumes = tmp_path / "volumes"

    refused = paste(
        cluster,
        tmp_path,
        stack_context(STACK),
        run_command(config, "submit", "--name", "urgent", "--priority", "urgent") + " 2>&1; :",
    )
    assert f"it offers {LOW}, {HIGH}; nothing was created" in refused, refused
    assert not cluster.kube.list(JOBSET_API, "JobSet", namespace)

    submit_run(cluster, config, tmp_path, LOW, ("--priority", LOW))
    checkpoints = volumes / "ml-dev-env-workspace" / "checkpoints" / LOW
    preempted = preemption_drill(cluster, namespace, config, tmp_path, checkpoints)
    # SIGTERM saved the step the low run stopped at (at or after the last one seen before the
    # high run came), and it resumed from that save: no step lost.
    assert preempted.saved >= preempted.last_before, preempted
    assert preempted.resumed_from == preempted.saved, preempted
