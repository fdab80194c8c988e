"""monitoring.runMetrics in the render: the training container the stack renders, started as its
pod would start it (the scripts ConfigMap's launcher, the container's env with its pod's fields
filled in), serves the run's metrics on its `metrics` port, labelled from those fields
(issue #41). The exporter itself: tests/test_run_metrics.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.facts.kueue import JOBSET_NAME_LABEL, JOBSET_RESTART_ATTEMPT_LABEL
from tests.conftest import manifests, pod_spec, pod_template, run_stack, scripts_data
from tests.test_run_metrics import (
    PATIENCE_SECONDS,
    RESTART_LINE,
    samples,
    scrape,
    wait_for,
)
from tools.realtier.controlplane import free_port

# The launchers it starts are given train.py, which must be there.
pytestmark = pytest.mark.usefixtures("beside_a_training_script")

JOBSET = ("workload.kind=jobset", "workload.command[0]=/workspace/train.py")
METRICS = ("monitoring.runMetrics.enabled=true", r"launcher.firstStepPattern=^step \d+$")
# The pod the controllers would make: its fields, as the downward API reads them.
NAMESPACE, NODE, INDEX, RUN, ATTEMPT = "team-a", "gpu-node-3", "1", "llm-7", "2"
LABELS = {
    JOBSET_NAME_LABEL: RUN,
    JOBSET_RESTART_ATTEMPT_LABEL: ATTEMPT,
    "apps.kubernetes.io/pod-index": INDEX,
}
ANNOTATIONS = {"batch.kubernetes.io/job-completion-index": INDEX}
FIELDS = {"metadata.namespace": NAMESPACE, "spec.nodeName": NODE}


def field_value(path: str, labels: dict[str, str]) -> str:
    """A downward-API fieldPath of the pod (kubernetes pkg/fieldpath ExtractFieldPathAsString:
    a label or annotation the pod lacks is the empty string)."""
    keyed = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if keyed is None:
        return FIELDS[path]
    return (labels if keyed[1] == "labels" else ANNOTATIONS).get(keyed[2], "")


def container_env(container: dict[str, Any], labels: dict[str, str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "fieldRef" in var.get("valueFrom", {}):
            env[var["name"]] = field_value(var["valueFrom"]["fieldRef"]["fieldPath"], labels)
    return env


@pytest.mark.parametrize(
    ("stack", "overrides", "labels", "run"),
    [
        ("nerc-production", JOBSET, LABELS, RUN),
        ("nerc-production", (), {**LABELS, "app.kubernetes.io/instance": "train"}, "train"),
    ],
    ids=["jobset", "statefulset"],
)
def test_the_rendered_training_container_serves_its_runs_metrics(
    tmp_path: Path, stack: str, overrides: tuple[str, ...], labels: dict[str, str], run: str
) -> None:
    port = free_port()
    rendered = run_stack(stack, *overrides, *METRICS, f"monitoring.runMetrics.port={port}")
    (training,) = (c for c in pod_spec(rendered)["containers"] if c["name"] == "training")
    assert {"name": "metrics", "containerPort": port} in training["ports"]
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name, text in scripts_data(rendered).items():
        (scripts / name).write_text(text)
    trainer = tmp_path / "torchrun"
    # Keeps its PID, and with it the exporter, until the test has scraped.
    trainer.write_text(
        f'#!/bin/sh\necho "step 1"\necho "{RESTART_LINE}" >&2\necho "step 2"\n'
        'while [ ! -e "$HOLD" ]; do sleep 0.05; done\n'
    )
    trainer.chmod(0o755)
    env = {
        **container_env(training, {**labels, "app.kubernetes.io/instance": run}),
        "PATH": "/usr/bin:/bin",
        "TORCHRUN_BIN": str(trainer),
        "RUN_METRICS_PYTHON": sys.executable,
        "LAUNCH_PID_FILE": str(tmp_path / "launch.pid"),
        "NCCL_ENV_FILE": str(tmp_path / "absent.env"),
        "PREFLIGHT": "0",
        "HOLD": str(tmp_path / "hold"),
    }
    launcher = subprocess.Popen(
        ["bash", str(scripts / "launch-torchrun.sh"), "train.py"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    expected = {"run": run, "namespace": NAMESPACE, "rank": INDEX, "node": NODE}
    try:
        found: dict[tuple[str, str], float] = {}

        def counted() -> bool:
            nonlocal found
            text = scrape(port)
            found = samples(text, expected) if text is not None else {}
            return found.get(("gpu_cluster_run_steps_total", ""), 0) == 2

        wait_for(counted, "the rendered container's two steps")
        restarts = int(ATTEMPT) + 1 if overrides == JOBSET else 1
        assert found[("gpu_cluster_run_restarts_total", "")] == restarts
    finally:
        (tmp_path / "hold").touch()
        _, err = launcher.communicate(timeout=PATIENCE_SECONDS)
    assert launcher.returncode == 0, err


def test_off_by_default_no_port_no_exporter() -> None:
    rendered = run_stack("nerc-production", *JOBSET)
    (training,) = (c for c in pod_spec(rendered)["containers"] if c["name"] == "training")
    assert [p["name"] for p in training["ports"]] == ["rendezvous"]
    assert "run_metrics.py" not in scripts_data(rendered)
    assert not {v["name"] for v in training["env"]} & {"RUN_METRICS_PORT", "RUN_NAME"}


@pytest.mark.parametrize(
    ("stack", "kind", "endpoints"),
    [
        ("nerc-production", "PodMonitor", "podMetricsEndpoints"),
        ("gcp-a4", "PodMonitoring", "endpoints"),
    ],
)
def test_the_scrape_object_reaches_the_training_pods_metrics_port(
    stack: str, kind: str, endpoints: str
) -> None:
    rendered = run_stack(stack, "monitoring.runMetrics.enabled=true")
    template = pod_template(rendered)
    pod_labels = template["metadata"]["labels"]
    # One of the kind selects the training pods (gcp-a4 has Kueue's too).
    (scrape,) = (
        m
        for m in manifests(rendered, kind)
        if m["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    )
    (training,) = (c for c in template["spec"]["containers"] if c["name"] == "training")
    (endpoint,) = scrape["spec"][endpoints]
    assert endpoint["port"] in {p["name"] for p in training["ports"]}
    # The pods' NetworkPolicy lets the platform's Prometheus in, on that port alone.
    (policy,) = manifests(rendered, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    from_scrapers = [
        rule
        for rule in policy["spec"]["ingress"]
        if any("namespaceSelector" in peer for peer in rule["from"])
    ]
    assert [rule["ports"] for rule in from_scrapers] == [
        [{"port": endpoint["port"], "protocol": "TCP"}]
    ]


def test_run_metrics_without_a_step_pattern_warn_that_no_step_is_counted() -> None:
    def warned(*sets: str) -> list[str]:
        return [w for w in run_stack("nerc-production", *sets).warnings if "firstStepPattern" in w]

    (warning,) = warned("monitoring.runMetrics.enabled=true")
    assert "no line counts as a step" in warning
    stepped = ("monitoring.runMetrics.enabled=true", r"launcher.firstStepPattern=^step \d+")
    assert warned(*stepped) == []
    assert warned() == []
