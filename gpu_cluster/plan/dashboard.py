"""The stack's dashboard (monitoring.dashboard): what it shows, as PromQL over the metrics the
platforms collect (GPUs: NVIDIA's DCGM exporter; runs: the launcher's exporter,
scripts/run_metrics.py; queue: Kueue), one definition for both platforms' forms
(plan/dashboard_forms.py). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpu_cluster.config.derived import shows_gpu_metrics
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.workload import cluster_scoped_name
from gpu_cluster.facts.dashboards import (
    DCGM_GPU_UTILIZATION,
    DCGM_MEMORY_USED,
    DCGM_NODE_LABEL,
    DCGM_POWER,
    KUEUE_ADMISSION_WAIT,
    KUEUE_ADMITTED,
    KUEUE_EVICTED,
    KUEUE_PENDING,
)
from gpu_cluster.facts.health import PAIR_CHECK
from gpu_cluster.plan.health_runner import runner_checks
from gpu_cluster.plan.run_ledger import run_ledger_plan

# What the node health runner serves (scripts/health_metrics.py), labelled node and peer, or
# node, check and result; its namespace the scrape's.
FABRIC_BUSBW = "gpu_cluster_fabric_bus_bandwidth_bytes_per_second"
NODE_RESULT = "gpu_cluster_node_health_result"
# What the launcher's exporter serves (scripts/run_metrics.py), labelled run, namespace, rank
# and node.
RUN_STEPS = "gpu_cluster_run_steps_total"
RUN_STEP_DURATION = "gpu_cluster_run_step_duration_seconds"
RUN_LAST_STEP = "gpu_cluster_run_last_step_timestamp_seconds"
RUN_RESTARTS = "gpu_cluster_run_restarts_total"
RUN_GPUS = "gpu_cluster_run_gpus"
# What the runs' ledger exporter serves (scripts/run_ledger.py), labelled namespace and run (and
# bucket: the ledger's bucket as a label value).
RUN_LEDGER = "gpu_cluster_run_ledger_seconds"
RUN_WALL = "gpu_cluster_run_wall_seconds"
PRODUCTIVE_BUCKET = "productive_steps"
# MiB, DCGM's unit of GPU memory, in bytes.
MIB = 1024 * 1024
# The window rates and means are taken over: several scrapes at either platform's 30 s.
WINDOW = "5m"


class Unit(Enum):
    """What a panel's values measure; each form names it its own way."""

    RATIO = "ratio"  # 0..1
    BYTES = "bytes"
    BYTES_PER_SECOND = "bytes per second"
    SECONDS = "seconds"
    WATTS = "watts"
    PER_SECOND = "per second"
    COUNT = "count"


@dataclass(frozen=True)
class Panel:
    """One chart: `query` (PromQL), each series named by `legend` (label names in `{{ }}`)."""

    title: str
    query: str
    unit: Unit
    legend: str


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


def dashboard_title(s: Settings) -> str:
    return f"GPU training: {s.namespace}/{s.name}"


def dashboard_rows(s: Settings) -> tuple[Row, ...]:
    """The rows of stack `s`'s dashboard: its GPUs always, its runs when they serve metrics
    (monitoring.runMetrics) and their goodput where the ledger exporter serves it, its queue
    when it creates one (a referenced ClusterQueue's name is not the stack's to know), its
    nodes' health and fabric when its health runner checks them."""
    runs = _selector(namespace=s.namespace) if s.monitoring.run_metrics.enabled else None
    # A dashboard is shown only with one or the other (config/rules.py, derived.py).
    rows = [_gpus(shows_gpu_metrics(s), runs)]
    if runs is not None:
        rows.append(_runs(runs))
    if runs is not None and run_ledger_plan(s) is not None:
        rows.append(_goodput(runs))
    if s.workload.kind == "jobset" and s.workload.queue.mode == "create":
        rows.append(_queue(_selector(cluster_queue=cluster_scoped_name(s))))
    checks = runner_checks(s)
    if checks:
        rows.append(_node_health(_selector(namespace=s.namespace), PAIR_CHECK in checks))
    return tuple(rows)


def _selector(**labels: str) -> str:
    inner = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return f"{{{inner}}}"


def _gpus(dcgm: bool, runs: str | None) -> Row:
    """With `dcgm`, every GPU node's DCGM figures: the exporter labels GPUs by node, not by the
    pod that holds them, on both platforms' collection. With the runs' metrics (`runs`, their
    selector), the GPUs each run holds, from its pods: the area under a run's line is its GPU
    time."""
    node = DCGM_NODE_LABEL
    per_node = (
        Panel(
            "GPU utilization per node",
            f"avg by ({node}) ({DCGM_GPU_UTILIZATION}) / 100",
            Unit.RATIO,
            f"{{{{{node}}}}}",
        ),
        Panel(
            "GPU memory used per node",
            f"sum by ({node}) ({DCGM_MEMORY_USED}) * {MIB}",
            Unit.BYTES,
            f"{{{{{node}}}}}",
        ),
        Panel(
            "GPU power per node",
            f"sum by ({node}) ({DCGM_POWER})",
            Unit.WATTS,
            f"{{{{{node}}}}}",
        ),
    )
    held = Panel("GPUs held per run", f"sum by (run) ({RUN_GPUS}{runs})", Unit.COUNT, "{{run}}")
    return Row("GPUs", (*(per_node if dcgm else ()), *((held,) if runs is not None else ())))


def _runs(selector: str) -> Row:
    """The runs' progress: a stalled run's last step ages, a straggling rank's steps slow."""
    return Row(
        "Training runs",
        (
            Panel(
                "Steps per second",
                f"max by (run) (rate({RUN_STEPS}{selector}[{WINDOW}]))",
                Unit.PER_SECOND,
                "{{run}}",
            ),
            Panel(
                "Step time per rank",
                f"rate({RUN_STEP_DURATION}_sum{selector}[{WINDOW}])"
                f" / rate({RUN_STEP_DURATION}_count{selector}[{WINDOW}])",
                Unit.SECONDS,
                "{{run}} rank {{rank}}",
            ),
            Panel(
                "Seconds since the last step",
                f"time() - max by (run) ({RUN_LAST_STEP}{selector})",
                Unit.SECONDS,
                "{{run}}",
            ),
            Panel(
                "Restarts",
                f"max by (run) ({RUN_RESTARTS}{selector})",
                Unit.COUNT,
                "{{run}}",
            ),
        ),
    )


def _goodput(selector: str) -> Row:
    """Each run's goodput ledger: the share of its wall time spent stepping, and where the
    rest went (queue, start, restarts, re-done steps)."""
    productive = selector.replace("}", f', bucket="{PRODUCTIVE_BUCKET}"}}')
    return Row(
        "Goodput",
        (
            Panel(
                "Share of each run's time spent stepping",
                f"sum by (run) ({RUN_LEDGER}{productive}) / sum by (run) ({RUN_WALL}{selector})",
                Unit.RATIO,
                "{{run}}",
            ),
            Panel(
                "Where each run's time went",
                f"sum by (run, bucket) ({RUN_LEDGER}{selector})",
                Unit.SECONDS,
                "{{run}} {{bucket}}",
            ),
        ),
    )


def _queue(selector: str) -> Row:
    return Row(
        "Queue",
        (
            Panel(
                "Runs waiting",
                f"sum by (status) ({KUEUE_PENDING}{selector})",
                Unit.COUNT,
                "{{status}}",
            ),
            Panel(
                "Runs admitted",
                f"sum({KUEUE_ADMITTED}{selector})",
                Unit.COUNT,
                "admitted",
            ),
            Panel(
                "Admission wait, 90th percentile over an hour",
                "histogram_quantile(0.9, sum by (le) "
                f"(rate({KUEUE_ADMISSION_WAIT}_bucket{selector}[1h])))",
                Unit.SECONDS,
                "p90",
            ),
            Panel(
                "Evictions in the last hour",
                f"sum by (reason) (increase({KUEUE_EVICTED}{selector}[1h]))",
                Unit.COUNT,
                "{{reason}}",
            ),
        ),
    )


def _node_health(selector: str, pairs: bool) -> Row:
    """What the node health runner found: each node's results, each pair's bus bandwidth
    (a link that degrades shows here before a run fails on it)."""
    results = Panel(
        "GPU nodes by check result",
        f"count by (check, result) ({NODE_RESULT}{selector})",
        Unit.COUNT,
        "{{check}} {{result}}",
    )
    fabric = Panel(
        "Bus bandwidth between nodes (fabric check)",
        f"max by (node, peer) ({FABRIC_BUSBW}{selector})",
        Unit.BYTES_PER_SECOND,
        "{{node}} to {{peer}}",
    )
    return Row("Node health", (results, fabric) if pairs else (results,))
