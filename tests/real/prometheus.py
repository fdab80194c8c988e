"""A real Prometheus (built by tools/realtier) for a test: started with the scrape configs the
test gives, asked with its HTTP API."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.test_run_metrics import free_port
from tools.realtier.build import Tools

# Prometheus' smallest useful scrape interval: tests wait for a few scrapes.
SCRAPE_INTERVAL = "1s"


@contextmanager
def running_prometheus(
    tools: Tools, workdir: Path, scrape_configs: list[dict[str, Any]]
) -> Iterator[str]:
    """Prometheus scraping `scrape_configs` (its configuration file's own form), its data in
    `workdir`; yields its base URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        json.dumps(
            {"global": {"scrape_interval": SCRAPE_INTERVAL}, "scrape_configs": scrape_configs}
        )
    )
    listen = f"127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [
            str(tools.binary("prometheus")),
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
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


def evaluated(base: str, expression: str) -> dict[str, Any]:
    """Prometheus' answer to an instant query, its error too (HTTP 400: not PromQL); status
    `unreachable` while it does not answer it yet."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as error:
        try:
            body = json.load(error)
        except ValueError:  # not the API's answer: 503 "Service Unavailable" while starting
            body = {"status": "unreachable"}
    except OSError:
        body = {"status": "unreachable"}
    return body


def query(base: str, expression: str) -> list[dict[str, Any]]:
    """The series an instant query returns; [] while Prometheus does not answer yet."""
    body = evaluated(base, expression)
    if body["status"] == "unreachable":
        return []
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def value_of(base: str, expression: str) -> float | None:
    """The one series' value; None unless there is exactly one."""
    result = query(base, expression)
    if len(result) != 1:
        return None
    return float(result[0]["value"][1])


def lint_findings(tools: Tools, exposition: str) -> str:
    """What `promtool check metrics`, Prometheus' own linter of names, units and types, says of
    `exposition`: "" when it passes and says nothing."""
    lint = subprocess.run(
        [str(tools.binary("promtool")), "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        check=False,
    )
    said = lint.stdout + lint.stderr
    return said if lint.returncode == 0 else f"exit {lint.returncode}: {said}"
