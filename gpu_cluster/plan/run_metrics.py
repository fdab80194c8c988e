"""A run's own metrics (monitoring.runMetrics): what the training container needs to serve
them (scripts/run_metrics.py, started by the launcher) and which pod fields label them."""

from __future__ import annotations

from gpu_cluster.config.schema import Settings

# The exporter, shipped beside the launchers in the scripts ConfigMap.
RUN_METRICS_SCRIPT = "run_metrics.py"
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
