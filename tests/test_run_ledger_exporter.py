"""The runs' ledger exporter (scripts/run_ledger.py, components/run_ledger.py): which stacks run
it, with what rights, that the package modules it ships import in its pod without the rest of
the program, and what it keeps of rank 0's log. Its numbers against a real run, a real API
server and a real Prometheus: tests/real/test_drills.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_stack
from tests.script_modules import load_script

run_ledger = load_script("run_ledger")

LEDGER = ("monitoring.runMetrics.enabled=true", r"launcher.firstStepPattern=^step (\d+) ")
JOBSET = ("workload.kind=jobset", "workload.command[0]=t.py")
STEP = r"^step (\d+) "


def exporter_objects(*sets: str) -> list[dict[str, Any]]:
    run = run_stack("nerc-production", *sets)
    return [m for m in run.manifests() if "-run-ledger" in m["metadata"]["name"]]


def test_a_jobset_stack_with_run_metrics_and_a_step_line_runs_it_reading_only() -> None:
    objects = exporter_objects(*JOBSET, *LEDGER)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ConfigMap", "Deployment", "NetworkPolicy", "PodMonitor", "Role", "RoleBinding",
        "ServiceAccount",
    ]  # fmt: skip
    # No cluster-wide right, so no cluster-scoped object a project admin could not create.
    (role,) = (o for o in objects if o["kind"] == "Role")
    verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
    assert verbs == {"get", "list"}
    read = {
        (group, res) for r in role["rules"] for group in r["apiGroups"] for res in r["resources"]
    }
    assert read == {
        ("jobset.x-k8s.io", "jobsets"), ("kueue.x-k8s.io", "workloads"), ("", "pods"),
        ("", "events"), ("", "pods/log"),
    }  # fmt: skip
    # Without any of the three, no exporter.
    assert exporter_objects(*JOBSET, LEDGER[0]) == []
    assert exporter_objects(*JOBSET, LEDGER[1]) == []
    assert exporter_objects(*LEDGER) == []


def test_what_it_ships_imports_in_its_pod_without_the_program(tmp_path: Path) -> None:
    """The ConfigMap's files, where the volume's items put them, are all the script needs:
    started there by a Python that finds nothing else, it gets as far as its settings."""
    objects = exporter_objects(*JOBSET, *LEDGER)
    (config_map,) = (o for o in objects if o["kind"] == "ConfigMap")
    (deployment,) = (o for o in objects if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (volume,) = pod["volumes"]
    (container,) = pod["containers"]
    (mount,) = container["volumeMounts"]
    root = tmp_path / mount["mountPath"].lstrip("/")
    for item in volume["configMap"]["items"]:
        (root / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (root / item["path"]).write_text(config_map["data"][item["key"]])
    _, script = container["command"]
    started = subprocess.run(
        [sys.executable, "-E", "-s", "-S", str(tmp_path / script.lstrip("/"))],
        env={},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # No PYTHONPATH (-E), site-packages (-s, -S) or settings: the standard library and the
    # script's own folder, as in its image.
    assert started.returncode == 78, started.stderr
    assert "run-ledger: bad or missing setting 'RUN_LEDGER_NAMESPACE'" in started.stderr


def test_the_log_kept_is_the_steps_and_restarts_after_the_last_line_read() -> None:
    restart = "[default] Worker group FAILED. 3/3 attempts left; will restart worker group"
    kept = run_ledger.KeptLog()
    kept.add(
        "2026-11-30T01:00:00.100000000Z starting\n"
        "2026-11-30T01:00:01.5Z step 1 loss 2.0\n"
        f"2026-11-30T01:00:02Z {restart}\n",
        STEP,
    )
    # Read again from the same second (sinceTime is whole seconds): nothing twice.
    kept.add(f"2026-11-30T01:00:02Z {restart}\n2026-11-30T01:00:03.25Z step 2 loss 1.0\n", STEP)
    assert [(s.number, s.at.second, s.at.microsecond) for s in kept.steps] == [
        (1, 1, 500000),
        (2, 3, 250000),
    ]
    assert [at.second for at in kept.restarts] == [2]
    # A log cut at its limit: its last line, maybe half of one, waits for the next read.
    kept.add("2026-11-30T01:00:04Z step 3 loss 0.5\n2026-11-30T01:00:05Z step 4 lo", STEP, cut=True)
    assert [s.number for s in kept.steps] == [1, 2, 3]
    assert kept.last is not None and kept.last.second == 4
    kept.add("2026-11-30T01:00:05Z step 4 loss 0.2\n", STEP)
    assert [s.number for s in kept.steps] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("bucket", "label"),
    [("health gate / init", "health_gate_init"), ("re-done steps", "re_done_steps")],
)
def test_buckets_are_label_values_without_spaces(bucket: str, label: str) -> None:
    assert run_ledger.bucket_label(bucket) == label
