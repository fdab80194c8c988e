"""The run's metrics as a real Prometheus sees them (issue #41): built from its Go module at a
pinned release (tools/realtier), it scrapes the exporter a real launcher started for a fake
trainer, and its series hold what the trainer printed; `promtool check metrics`, Prometheus' own
linter of names, units and types, finds nothing in what the exporter serves."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_run_metrics import (
    LABELS,
    free_port,
    launcher_environment,
    running_launcher,
    scrape,
    wait_for,
)
from tools.realtier.build import Tools

# The launcher it starts is given train.py, which must be there.
pytestmark = [pytest.mark.real, pytest.mark.usefixtures("beside_a_training_script")]
# Prometheus' smallest useful scrape interval: the test waits for a few scrapes.
SCRAPE_INTERVAL = "1s"


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
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": SCRAPE_INTERVAL},
                "scrape_configs": [{"job_name": "run", "static_configs": [{"targets": [target]}]}],
            }
        )
    )
    listen = f"127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [
            str(tools.binary("prometheus")),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address={listen}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield f"http://{listen}"
    finally:
        server.terminate()
        server.communicate(timeout=30)


def query(base: str, expression: str) -> list[dict[str, object]]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
    except OSError:
        return []
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


def value_of(base: str, expression: str) -> float | None:
    result = query(base, expression)
    if len(result) != 1:
        return None
    sample = result[0]["value"]
    assert isinstance(sample, list)
    return float(sample[1])


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
    # Every metric the exporter serves passes Prometheus' own linter.
    text = scrape(int(launcher_env["RUN_METRICS_PORT"]))
    assert text is not None
    lint = subprocess.run(
        [str(tools.binary("promtool")), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0 and lint.stdout + lint.stderr == "", lint.stdout + lint.stderr
