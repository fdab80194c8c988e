"""`gpu-cluster run` before it reaches a cluster (issue #40): its arguments, the names it gives
runs, and the refusals that need no cluster; a run's state from its objects.

The commands on the real managers, as a submitter and as a user without the Role:
tests/real/test_runs.py."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import pytest

from gpu_cluster.offline.cli import main
from gpu_cluster.offline.run_cli import add_run_arguments, default_name
from gpu_cluster.offline.run_cluster import lines
from gpu_cluster.offline.run_state import age, state
from gpu_cluster.plan.run_template import RUN_NAME, RUN_NAME_MAX
from tests.conftest import ROOT, stack_context

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()

    def stack_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("--stack", required=True)

    add_run_arguments(parser, stack_arguments)
    return parser.parse_args(argv)


def test_submit_takes_the_command_after_the_double_dash_with_its_own_flags() -> None:
    args = parse(
        "submit", "--stack", "s", "--nodes", "1", "--env", "A=1", "--env", "B=2",
        "--", "/workspace/train.py", "--lr", "0.1", "--nodes", "4",
    )  # fmt: skip
    assert args.nodes == 1
    assert args.env == ["A=1", "B=2"]
    assert args.training_command == ["/workspace/train.py", "--lr", "0.1", "--nodes", "4"]
    assert parse("submit", "--stack", "s").training_command == []


def test_status_draws_the_ledger_where_it_is_asked() -> None:
    args = parse("status", "r", "--stack", "s", "--svg", "out/ledger.svg")
    assert (args.run, args.svg) == ("r", Path("out/ledger.svg"))
    assert parse("status", "r", "--stack", "s").svg is None


@pytest.mark.parametrize("stack_name", ["gpu-cluster", "a" * 52, "x" * 27 + "-" + "y" * 24])
def test_a_default_name_is_a_run_name_with_the_time(stack_name: str) -> None:
    name = default_name(stack_name, NOW)
    assert name.endswith("-0102-030405")
    assert name.startswith(stack_name[:10])
    assert len(name) <= RUN_NAME_MAX
    assert RUN_NAME.fullmatch(name)


def test_a_stack_without_a_context_is_refused_before_any_cluster_is_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        ["run", "list", "--stack", "barcelona", "--set", "kubernetes:context=",
         "--project-dir", str(ROOT)]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "this stack sets no kubernetes:context" in err, err


def test_a_context_missing_from_the_kubeconfig_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    code = main(["run", "list", "--stack", "barcelona", "--project-dir", str(ROOT)])
    assert code == 2
    err = capsys.readouterr().err
    context = stack_context("barcelona")
    assert f"kube context {context} of stack 'barcelona' cannot be used" in err, err


def job_set(**status: object) -> dict[str, object]:
    return {"metadata": {"name": "r"}, "spec": {"suspend": False}, "status": status}


ADMITTED = {"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}


@pytest.mark.parametrize(
    ("obj", "workload", "running", "expected"),
    [
        ({"metadata": {}, "spec": {"suspend": True}}, None, 0, "queued"),
        ({"metadata": {}, "spec": {"suspend": True}}, ADMITTED, 0, "admitted"),
        (job_set(), ADMITTED, 2, "running"),
        (job_set(conditions=[{"type": "Completed", "status": "True"}]), ADMITTED, 0, "succeeded"),
        (job_set(conditions=[{"type": "Failed", "status": "True"}]), ADMITTED, 0, "failed"),
        ({"metadata": {"deletionTimestamp": "t"}, "spec": {}}, ADMITTED, 2, "stopped"),
    ],
)
def test_a_run_s_state(obj: dict, workload: dict | None, running: int, expected: str) -> None:  # type: ignore[type-arg]
    assert state(obj, workload, running) == expected


def test_age_and_columns_as_kubectl_shows_them() -> None:
    assert age("2026-01-02T03:03:00Z", NOW) == "1m5s"
    assert age("2026-01-01T01:00:00Z", NOW) == "1d2h"
    assert list(lines([("NAME", "STATE"), ("a-long-name", "queued")])) == [
        "NAME         STATE",
        "a-long-name  queued",
    ]
