"""The runs' ledger exporter of a JobSet stack (pure): scripts/run_ledger.py in one pod of the
namespace, serving each run's goodput ledger (gpu_cluster/ledger.py, shipped beside it) as
metrics the platform's Prometheus scrapes."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.config.derived import queue_name, run_ledger_name
from gpu_cluster.config.schema import Settings
from gpu_cluster.plan.health_gate import NOBODY_UID, health_gate_check
from gpu_cluster.plan.launch import TRAINING_CONTAINER
from gpu_cluster.plan.run_metrics import MetricsScrape, platform_scrape

RUN_LEDGER_SCRIPT = "run_ledger.py"
RUN_LEDGER_MODULES = ("prometheus_text.py",)
# The package's modules it imports: the ledger's rules, the timeline's readers they use.
RUN_LEDGER_PACKAGE_MODULES = ("ledger.py", "timeline.py", "facts/kueue.py")
# The port it serves on, in its own pod: the runs' default (monitoring.runMetrics.port).
RUN_LEDGER_METRICS_PORT = 9464
# Seconds between its passes: a ledger changes by the second, a dashboard shows minutes.
RUN_LEDGER_POLL_SECONDS = 60
# It keeps every step line of each run's current rank 0 (read once) and splits them again each
# pass: for a million steps, about 130 MiB and 7 CPU seconds a pass (measured here, on a loaded
# 2-core VM). A tenth of a core, half at most, and 512Mi, where the stack's other controllers,
# which read a few objects, ask for 10m and 64Mi; past a few million steps its metrics lag.
RUN_LEDGER_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
RUN_LEDGER_LIMITS = {"cpu": "500m", "memory": "512Mi"}


@dataclass(frozen=True)
class RunLedgerPlan:
    """name: its objects' and ServiceAccount's; queue: the LocalQueue whose runs it reads."""

    name: str
    namespace: str
    image: str
    run_as_user: int | None
    queue: str
    step_pattern: str
    health_check: str | None
    scrape: MetricsScrape

    def env(self) -> dict[str, str]:
        """The script's settings (its docstring lists them)."""
        return {
            "RUN_LEDGER_NAMESPACE": self.namespace,
            "RUN_LEDGER_QUEUE": self.queue,
            "RUN_LEDGER_CONTAINER": TRAINING_CONTAINER,
            "RUN_LEDGER_STEP_PATTERN": self.step_pattern,
            "RUN_LEDGER_HEALTH_CHECK": self.health_check or "",
            "RUN_LEDGER_POLL_SECONDS": str(RUN_LEDGER_POLL_SECONDS),
            "RUN_LEDGER_METRICS_PORT": str(RUN_LEDGER_METRICS_PORT),
        }


def run_ledger_plan(s: Settings) -> RunLedgerPlan | None:
    """Stack `s`'s exporter: with the runs' metrics on a JobSet stack whose step line it knows;
    None otherwise."""
    pattern = s.launcher.first_step_pattern
    if not s.monitoring.run_metrics.enabled or s.workload.kind != "jobset" or pattern is None:
        return None
    return RunLedgerPlan(
        name=run_ledger_name(s),
        namespace=s.namespace,
        image=s.monitoring.run_metrics.ledger_image,
        run_as_user=None if s.platform == "openshift" else NOBODY_UID,
        queue=queue_name(s),
        step_pattern=pattern,
        health_check=health_gate_check(s),
        scrape=platform_scrape(s.platform),
    )
