"""A real Prometheus (built by tools/realtier) for a test: started with the scrape configs the
test gives, asked with its HTTP API."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tools.realtier.build import Tools
from tools.realtier.controlplane import free_port, tool_env

# Prometheus' smallest useful scrape interval: tests wait for a few scrapes.
SCRAPE_INTERVAL = "1s"


@contextmanager
def running_prometheus(
    tools: Tools,
    workdir: Path,
    scrape_configs: list[dict[str, Any]],
    *,
    host: str = "127.0.0.1",
    enter: Callable[[list[str]], list[str]] = list,
) -> Iterator[str]:
    """Prometheus scraping `scrape_configs` (its configuration file's own form), its data in
    `workdir`, listening on `host`, started through `enter` (a network namespace's nsenter);
    yields its base URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        json.dumps(
            {"global": {"scrape_interval": SCRAPE_INTERVAL}, "scrape_configs": scrape_configs}
        )
    )
    listen = f"{host}:{free_port()}"
    server = subprocess.Popen(
        enter(
            [
                str(tools.binary("prometheus")),
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address={listen}",
            ]
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=tool_env(),
    )
    try:
        yield f"http://{listen}"
    finally:
        server.terminate()
        server.communicate(timeout=30)


# A label name as prometheus-operator writes a Kubernetes label into a meta label's name
# (v0.85.0 pkg/prometheus/promcfg.go sanitizeLabelName).
_NOT_IN_A_LABEL_NAME = re.compile(r"[^a-zA-Z0-9_]")


def pod_monitor_scrape(monitor: dict[str, Any], kubeconfig: Path) -> dict[str, Any]:
    """The scrape configuration prometheus-operator writes for `monitor`, a PodMonitor with one
    endpoint (v0.85.0 pkg/prometheus/promcfg.go generatePodMonitorConfig): the pods of its
    namespace found through the API (`kubeconfig`), running, with its selector's labels and a
    container port of the endpoint's name, labelled with their namespace, container and pod.
    The scrape interval stays the test's (SCRAPE_INTERVAL)."""
    meta, spec = monitor["metadata"], monitor["spec"]
    (endpoint,) = spec["podMetricsEndpoints"]

    def meta_label(kind: str, key: str) -> str:
        return f"__meta_kubernetes_pod_{kind}_{_NOT_IN_A_LABEL_NAME.sub('_', key)}"

    relabel: list[dict[str, Any]] = [
        {
            "action": "drop",
            "source_labels": ["__meta_kubernetes_pod_phase"],
            "regex": "(Failed|Succeeded)",
        },
        *(
            {
                "action": "keep",
                "source_labels": [meta_label("label", key), meta_label("labelpresent", key)],
                "regex": f"({value});true",
            }
            for key, value in sorted(spec["selector"]["matchLabels"].items())
        ),
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_pod_container_port_name"],
            "regex": endpoint["port"],
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    ]
    return {
        "job_name": f"podMonitor/{meta['namespace']}/{meta['name']}/0",
        "metrics_path": endpoint.get("path", "/metrics"),
        "kubernetes_sd_configs": [
            {
                "role": "pod",
                "kubeconfig_file": str(kubeconfig),
                "namespaces": {"names": [meta["namespace"]]},
            }
        ],
        "relabel_configs": relabel,
    }


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


def targets(base: str) -> list[str]:
    """Each active target's job, URL, health and last scrape error, as Prometheus reports them
    (/api/v1/targets): what a failure message shows of the scraping."""
    with urllib.request.urlopen(f"{base}/api/v1/targets", timeout=5) as response:
        active = json.load(response)["data"]["activeTargets"]
    return [
        f"{t['scrapePool']} {t['scrapeUrl']} {t['health']} {t['lastError']}".rstrip()
        for t in active
    ]


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
