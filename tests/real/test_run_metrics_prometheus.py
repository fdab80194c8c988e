"""The run's metrics as a real Prometheus sees them (issue #41): built from its Go module at a
pinned release (tools/realtier), it scrapes the exporter a real launcher started for a fake
trainer, and its series hold what the trainer printed; `promtool check metrics`, Prometheus' own
linter of names, units and types, finds nothing in what the exporter serves; every query of the
stack's dashboard (monitoring.dashboard) parses, and the run panels' return the run."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_stack
from tests.real.prometheus import (
    evaluated,
    lint_findings,
    query,
    running_prometheus,
    value_of,
)
from tests.test_dashboard import BARCELONA_JOBSET, METRICS, queries
from tests.test_run_metrics import (
    LABELS,
    launcher_environment,
    running_launcher,
    scrape,
    wait_for,
)
from tools.realtier.build import Tools

# The launcher it starts is given train.py, which must be there.
pytestmark = [pytest.mark.real, pytest.mark.usefixtures("beside_a_training_script")]


@pytest.fixture
def launcher_env(tmp_path: Path) -> dict[str, str]:
    return launcher_environment(tmp_path)


@pytest.fixture
def launched(launcher_env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    with running_launcher(launcher_env) as launcher:
        yield launcher


@pytest.fixture
def prometheus(tools: Tools, tmp_path: Path, launcher_env: dict[str, str]) -> Iterator[str]:
    """A real Prometheus scraping the launcher's exporter; yields its base URL."""
    target = f"127.0.0.1:{launcher_env['RUN_METRICS_PORT']}"
    scrape = [{"job_name": "run", "static_configs": [{"targets": [target]}]}]
    with running_prometheus(tools, tmp_path / "prometheus", scrape) as base:
        yield base


def test_prometheus_scrapes_the_runs_progress(
    tools: Tools,
    launcher_env: dict[str, str],
    launched: subprocess.Popen[str],
    prometheus: str,
) -> None:
    wait_for(
        lambda: value_of(prometheus, "gpu_cluster_run_steps_total") == 2,
        "Prometheus holding the trainer's two steps",
    )
    (series,) = query(prometheus, "gpu_cluster_run_restarts_total")
    labels = series["metric"]
    assert isinstance(labels, dict)
    # The exporter's own labels, next to the scrape's job and instance (namespace is no target
    # label here: a static target has none to clash with).
    assert {k: labels[k] for k in LABELS} == LABELS
    assert value_of(prometheus, "gpu_cluster_run_restarts_total") == 5
    assert value_of(prometheus, "count(gpu_cluster_run_last_step_timestamp_seconds)") == 1
    assert value_of(prometheus, "gpu_cluster_run_gpus") == int(launcher_env["GPUS_PER_NODE"])
    # Every metric the exporter serves passes Prometheus' own linter.
    text = scrape(int(launcher_env["RUN_METRICS_PORT"]))
    assert text is not None
    assert lint_findings(tools, text) == ""


def test_every_dashboard_query_parses_and_the_run_panels_show_the_run(
    launched: subprocess.Popen[str], prometheus: str
) -> None:
    # The stack the exporter's run belongs to: its namespace, its runs' metrics, its queue.
    namespace = LABELS["namespace"]
    shown = queries(run_stack("barcelona", *BARCELONA_JOBSET, METRICS, f"namespace={namespace}"))
    assert list(shown) == ["GPUs", "Training runs", "Queue"]
    wait_for(
        lambda: value_of(prometheus, "count_over_time(gpu_cluster_run_steps_total[1m])") == 3,
        "three scrapes of the run (a rate needs two)",
    )
    for expression in (each for row in shown.values() for each in row):
        body = evaluated(prometheus, expression)
        assert body["status"] == "success", (expression, body)
        data = body["data"]
        assert isinstance(data, dict)
        # The run's metrics' panels; DCGM's series need a GPU, Kueue's are not scraped here.
        if "gpu_cluster_run_" in expression:
            (series,) = data["result"]
            assert series["metric"]["run"] == LABELS["run"], (expression, series)
