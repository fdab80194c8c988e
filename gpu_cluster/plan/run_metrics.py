"""A run's own metrics (monitoring.runMetrics): what the training container needs to serve
them (scripts/run_metrics.py, started by the launcher), which pod fields label them, and the
platform's object that has them scraped."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.metrics_scrape import (
    GKE_MANAGED_COLLECTOR_NAMESPACES,
    OPENSHIFT_MONITORING_NAMESPACES,
    POD_MONITOR_API,
    POD_MONITOR_KIND,
    POD_MONITORING_API,
    POD_MONITORING_KIND,
    SCRAPE_INTERVAL,
)

# The exporter, shipped beside the launchers in the scripts ConfigMap.
RUN_METRICS_SCRIPT = "run_metrics.py"
# What it imports from beside it.
RUN_METRICS_MODULES = ("prometheus_text.py",)
# The training container's port the scrape objects name.
METRICS_PORT_NAME = "metrics"
METRICS_PATH = "/metrics"
# The pod fields (downward API fieldPaths) every training pod's series are labelled from; the
# run's name and its restarts come from the workload kind's own labels (its PodRole).
NODE_NAME_FIELD = "spec.nodeName"
NAMESPACE_FIELD = "metadata.namespace"


def metrics_port(s: Settings) -> int | None:
    """The port the training pods serve their run's metrics on; None: they serve none."""
    metrics = s.monitoring.run_metrics
    return metrics.port if metrics.enabled else None


def run_metrics_env(s: Settings) -> dict[str, str]:
    """The training container's plain env that starts the exporter (launch-common.sh)."""
    port = metrics_port(s)
    if port is None:
        return {}
    pattern = s.launcher.first_step_pattern
    return {
        "RUN_METRICS_PORT": str(port),
        **({"RUN_METRICS_STEP_PATTERN": pattern} if pattern is not None else {}),
    }


def metrics_field_env() -> dict[str, str]:
    """The training container's env from its pod's fields that labels the series (node,
    namespace), when it serves metrics."""
    return {"NODE_NAME": NODE_NAME_FIELD, "POD_NAMESPACE": NAMESPACE_FIELD}


@dataclass(frozen=True)
class MetricsScrape:
    """The platform's object that has its Prometheus scrape the training pods' `metrics` port
    (`api_version`, `kind`; its endpoints under `endpoints_key`), and the labels of the
    namespaces that Prometheus runs in (`scrapers`), which the pods' NetworkPolicy lets in."""

    api_version: str
    kind: str
    endpoints_key: str
    scrapers: dict[str, str]

    def spec(self, pod_labels: dict[str, str]) -> dict[str, object]:
        """The object's spec for the pods that carry `pod_labels`."""
        endpoint = {"port": METRICS_PORT_NAME, "path": METRICS_PATH, "interval": SCRAPE_INTERVAL}
        return {"selector": {"matchLabels": pod_labels}, self.endpoints_key: [endpoint]}


def platform_scrape(platform: str) -> MetricsScrape:
    """How `platform`'s Prometheus scrapes a namespace's pods."""
    if platform == "gke":
        return MetricsScrape(
            POD_MONITORING_API, POD_MONITORING_KIND, "endpoints", GKE_MANAGED_COLLECTOR_NAMESPACES
        )
    return MetricsScrape(
        POD_MONITOR_API, POD_MONITOR_KIND, "podMetricsEndpoints", OPENSHIFT_MONITORING_NAMESPACES
    )


def metrics_scrape(s: Settings) -> MetricsScrape | None:
    """How the stack's platform scrapes the run's metrics; None: they are not served."""
    if metrics_port(s) is None:
        return None
    return platform_scrape(s.platform)
