"""The `gpu-cluster` command as a user runs it: the console script of the installed wheel (the
checkout not importable), in a Pulumi project of the user's own, found from the working
directory up."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from gpu_cluster.offline.cli import main, offline_main
from gpu_cluster.offline.project import ProjectError, read_project
from gpu_cluster.offline.render import FILES, render
from tests.conftest import ROOT
from tests.installed import ENV, run

EXAMPLE = ROOT / "examples" / "a3-mega-pool"
# A program of its own project: one of the package's components and two of its own keys, one
# with a default in Pulumi.yaml (no namespace there: the project's own).
PROGRAM = """
import pulumi

from gpu_cluster.components.namespace import TrainingNamespace, TrainingNamespaceArgs

config = pulumi.Config()
TrainingNamespace("team", TrainingNamespaceArgs(namespace=config.require("namespace")))
pulumi.export("owner", config.require("owner"))
"""
PROJECT_FILE = """name: team-space
runtime: python
config:
  namespace:
    type: string
    default: ml-team
"""
STACK_FILE = "config:\n  team-space:owner: alice\n"


def gpu_cluster(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed console script with `args`, run in `cwd`."""
    return subprocess.run(
        [str(venv / "bin" / "gpu-cluster"), *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )


def rendered(out: Path) -> dict[str, str]:
    return {name: (out / name).read_text() for name in FILES}


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """A Pulumi project of the user's, with stacks dev and prod."""
    project = tmp_path / "team-space"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(PROJECT_FILE)
    (project / "__main__.py").write_text(PROGRAM)
    (project / "Pulumi.dev.yaml").write_text(STACK_FILE)
    (project / "Pulumi.prod.yaml").write_text(STACK_FILE.replace("alice", "bob"))
    return project


def test_the_command_runs_the_installed_package(installed_venv: Path, tmp_path: Path) -> None:
    probe = "import gpu_cluster; print(gpu_cluster.__file__)"
    found = run("-c", probe, cwd=tmp_path, python=str(installed_venv / "bin" / "python"))
    assert found.startswith(str(installed_venv / "lib"))
    assert (installed_venv / "bin" / "gpu-cluster").is_file()


def test_the_example_renders_from_its_own_folder_and_below(
    installed_venv: Path, tmp_path: Path
) -> None:
    example = shutil.copytree(EXAMPLE, tmp_path / "a3-mega-pool")
    (example / "notes").mkdir()
    for cwd, out in ((example, tmp_path / "here"), (example / "notes", tmp_path / "below")):
        result = gpu_cluster(installed_venv, "render", "--stack", "dev", "--out", str(out), cwd=cwd)
        assert result.returncode == 0, result.stderr
    assert rendered(tmp_path / "here") == rendered(tmp_path / "below")
    # The same render as the package's own function gives for that project.
    assert rendered(tmp_path / "here") == render("dev", project=read_project(EXAMPLE))
    assert json.loads((tmp_path / "here" / "outputs.json").read_text()) == {
        "nodePoolName": "a3mega",
        "statefulSetName": "a3mega",
    }


def test_a_program_of_its_own_gets_its_project_defaults_and_stack_config(
    installed_venv: Path, program: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = gpu_cluster(installed_venv, "render", "--stack", "dev", "--out", str(out), cwd=program)
    assert result.returncode == 0, result.stderr
    [namespace] = list(yaml.safe_load_all((out / "kubernetes.yaml").read_text()))
    assert (namespace["kind"], namespace["metadata"]["name"]) == ("Namespace", "ml-team")
    assert json.loads((out / "outputs.json").read_text()) == {"owner": "alice"}
    # A key without a namespace is the project's, as `pulumi config set` takes it.
    result = gpu_cluster(
        installed_venv,
        "diff",
        "--stack",
        "dev",
        str(out),
        "--set",
        "namespace=ml-other",
        cwd=program,
    )
    assert result.returncode == 1, result.stderr
    assert "-  name: ml-team\n+  name: ml-other\n" in result.stdout


def test_a_misspelt_namespace_of_the_program_is_refused(
    installed_venv: Path, program: Path, tmp_path: Path
) -> None:
    (program / "Pulumi.dev.yaml").write_text(STACK_FILE.replace("team-space:", "team-spce:"))
    result = gpu_cluster(
        installed_venv, "render", "--stack", "dev", "--out", str(tmp_path / "out"), cwd=program
    )
    assert result.returncode == 2
    assert "namespace 'team-spce' is not 'team-space' (a typo?)" in result.stderr
    assert not (tmp_path / "out").exists()


def test_diff_exits_0_without_changes_and_1_with_them(
    installed_venv: Path, program: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    first = gpu_cluster(installed_venv, "render", "--stack", "dev", "--out", str(old), cwd=program)
    assert first.returncode == 0, first.stderr
    same = gpu_cluster(installed_venv, "diff", "--stack", "dev", str(old), cwd=program)
    assert (same.returncode, same.stdout) == (0, ""), same.stderr
    other = gpu_cluster(installed_venv, "diff", "--stack", "prod", str(old), cwd=program)
    assert other.returncode == 1, other.stderr
    assert '-  "owner": "alice"\n+  "owner": "bob"\n' in other.stdout


def test_the_older_module_command_renders_the_same(
    installed_venv: Path, program: Path, tmp_path: Path
) -> None:
    python = str(installed_venv / "bin" / "python")
    script = str(installed_venv / "bin" / "gpu-cluster")
    for command, out in (
        ([python, "-m", "gpu_cluster.offline"], "old"),
        ([script, "render"], "new"),
    ):
        args = [*command, "--stack", "dev", "--out", str(tmp_path / out)]
        done = subprocess.run(args, cwd=program, env=ENV, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr
    assert rendered(tmp_path / "old") == rendered(tmp_path / "new")


def test_summary_of_two_renders(installed_venv: Path, program: Path, tmp_path: Path) -> None:
    for root, stack in (("base", "dev"), ("head", "prod")):
        out = str(tmp_path / root / "dev")
        result = gpu_cluster(installed_venv, "render", "--stack", stack, "--out", out, cwd=program)
        assert result.returncode == 0, result.stderr
    result = gpu_cluster(
        installed_venv, "summary", str(tmp_path / "base"), str(tmp_path / "head"), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "1 of 1 stacks change: `dev`." in result.stdout
    assert "Stack outputs changed: `owner`" in result.stdout


def test_help_lists_the_projects_stacks_and_the_exit_codes(
    installed_venv: Path, program: Path, tmp_path: Path
) -> None:
    # Found from the working directory, or named from elsewhere.
    for args, cwd in (
        (["--help"], program),
        (["render", "--help", "--project-dir", str(program)], tmp_path),
    ):
        result = gpu_cluster(installed_venv, *args, cwd=cwd)
        assert result.returncode == 0, result.stderr
        assert "stacks of project 'team-space'" in result.stdout
        assert ": dev, prod\n" in result.stdout
        for code in ("0  rendered", "1  diff: the render differs", "2  bad config"):
            assert code in result.stdout


def test_outside_a_project_it_says_so(installed_venv: Path, tmp_path: Path) -> None:
    result = gpu_cluster(
        installed_venv, "render", "--stack", "dev", "--out", str(tmp_path / "out"), cwd=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: no Pulumi.yaml in {tmp_path.resolve()} or any")


def test_version_is_the_packages(installed_venv: Path, tmp_path: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = gpu_cluster(installed_venv, "--version", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, f"gpu-cluster {version}\n")


def test_main_in_pulumi_yaml_names_the_programs_directory(program: Path) -> None:
    """Pulumi.yaml's `main:` moves the program; the stack files stay beside Pulumi.yaml."""
    (program / "src").mkdir()
    (program / "__main__.py").rename(program / "src" / "__main__.py")
    (program / "Pulumi.yaml").write_text(PROJECT_FILE + "main: src\n")
    project = read_project(program)
    assert (project.program, project.stacks()) == (program / "src", ["dev", "prod"])
    assert json.loads(render("prod", project=project)["outputs.json"]) == {"owner": "bob"}
    (program / "Pulumi.yaml").write_text(PROJECT_FILE + "main: elsewhere\n")
    with pytest.raises(ProjectError, match=r"`main: elsewhere` in .*: no __main__\.py"):
        read_project(program)


def test_diff_names_the_old_render_as_the_command_line_gave_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing"
    # The diff subcommand takes OLD_DIR as an argument; python -m gpu_cluster.offline as --diff.
    assert main(["diff", "--stack", "barcelona", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: OLD_DIR {missing}: no such directory\n"
    assert offline_main(["--stack", "barcelona", "--diff", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: --diff {missing}: no such directory\n"


def test_a_program_refusing_its_config_exits_2_and_a_crash_3(
    installed_venv: Path, program: Path, tmp_path: Path
) -> None:
    """A script tells a refusal (2) and a crash (3) from a change (1)."""
    (program / "Pulumi.bare.yaml").write_text("config: {}\n")  # team-space:owner unset
    out = tmp_path / "out"
    refused = gpu_cluster(
        installed_venv, "render", "--stack", "bare", "--out", str(out), cwd=program
    )
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(
        "error: Missing required configuration variable 'team-space:owner'"
    )
    assert "Traceback" not in refused.stderr
    (program / "__main__.py").write_text("raise ZeroDivisionError('a bug')\n")
    crashed = gpu_cluster(
        installed_venv, "render", "--stack", "dev", "--out", str(out), cwd=program
    )
    assert crashed.returncode == 3, crashed.stderr
    assert crashed.stderr.startswith("Traceback")
    assert crashed.stderr.endswith("ZeroDivisionError: a bug\n")
    assert not out.exists()
