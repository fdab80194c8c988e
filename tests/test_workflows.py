"""The GitHub workflows are valid and cover every shipped stack."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT, STACKS

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def test_workflows_match_the_github_workflow_schema() -> None:
    tool = shutil.which("check-jsonschema") or str(
        Path(sys.executable).with_name("check-jsonschema")
    )
    assert WORKFLOWS
    result = subprocess.run(
        [tool, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_stack_gets_a_preview_job() -> None:
    preview = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
    matrix = preview["jobs"]["preview"]["strategy"]["matrix"]["include"]
    assert sorted(entry["stack"] for entry in matrix) == STACKS


def test_ci_workflow_runs_the_ci_script() -> None:
    ci = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    assert any(step.get("run") == "bash .ci/run" for step in ci["jobs"]["test"]["steps"])
