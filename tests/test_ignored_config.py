"""Config is never silently ignored: a key under a misspelt namespace, or written twice in a
stack file, is refused by name (with the line); a namespace no provider of this program reads
draws a warning. Both in the offline render and in the program under the engine."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.providers import provider_key_problems
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.project import read_project
from gpu_cluster.offline.render import program_run
from gpu_cluster.offline.stack_files import engine_config
from tests.cli import ROOT, by_case, cli, program_copy, refused_stack_file

# Typos of the project's and the Kubernetes provider's namespaces.
MISSPELT = ["gpu_cluster", "gpucluster", "gpu-clsuter", "GPU-Cluster", "gpu-cluter", "kubernets"]


@pytest.mark.parametrize("namespace", MISSPELT)
def test_a_key_under_a_misspelt_namespace_is_refused_in_the_render(
    tmp_path: Path, namespace: str
) -> None:
    stack = f"config:\n  gpu-cluster:platform: openshift\n  {namespace}:nodes: 4\n"
    message = refused_stack_file(tmp_path, stack)
    assert f"{namespace}:nodes: namespace '{namespace}' is not" in message


@pytest.mark.parametrize("namespace", MISSPELT)
def test_a_key_under_a_misspelt_namespace_stops_the_program(namespace: str) -> None:
    """Under `pulumi up` the engine hands the program every namespace's keys."""
    config = {"gpu-cluster:platform": "openshift", f"{namespace}:nodes": "4"}
    run = ProgramRun()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, [], "engine", record_into=run)
    assert run.resources == []
    assert f"{namespace}:nodes: namespace '{namespace}' is not" in str(info.value)


# (case, stack file, what the message must say)
WRITTEN_TWICE = [
    (
        "top-level",
        "config:\n  gpu-cluster:platform: openshift\n  gpu-cluster:nodes: 2\n"
        "  gpu-cluster:nodes: 4\n",
        "Pulumi.given.yaml:4: gpu-cluster:nodes is written twice (first on line 3)",
    ),
    (
        "nested",
        "config:\n  gpu-cluster:platform: openshift\n  gpu-cluster:pod:\n"
        "    memoryLimit: 256Gi\n    cpuRequest: '8'\n    memoryLimit: 512Gi\n",
        "Pulumi.given.yaml:6: memoryLimit is written twice (first on line 4)",
    ),
    (
        "config-block",
        "config:\n  gpu-cluster:platform: openshift\nconfig:\n  gpu-cluster:nodes: 4\n",
        "Pulumi.given.yaml:3: config is written twice (first on line 1)",
    ),
]


@by_case("text, says", WRITTEN_TWICE)
def test_a_key_written_twice_is_refused_with_its_lines(
    tmp_path: Path, text: str, says: str
) -> None:
    assert says in refused_stack_file(tmp_path, text)


def test_a_namespace_nothing_reads_is_a_warning(tmp_path: Path) -> None:
    stack = (ROOT / "Pulumi.barcelona.yaml").read_text() + "  aws:region: us-east-1\n"
    project = program_copy(tmp_path / "project", {"extra": stack})
    result = cli("--stack", "extra", "--out", str(tmp_path / "out"), cwd=project)
    assert result.returncode == 0, result.stderr
    assert "warning: aws:region: namespace 'aws' is not read" in result.stderr
    config = {"gpu-cluster:platform": "openshift", "aws:region": "us-east-1"}
    assert any("aws:region" in w for w in run_program(config, [], "engine").warnings)


def test_the_providers_namespaces_draw_no_warning(tmp_path: Path) -> None:
    config = {
        "gpu-cluster:platform": "openshift",
        "kubernetes:context": "barcelona",
        "pulumi:tags": '{"team": "ml"}',
        "gpu-cluster:workload": '{"kind": "statefulset"}',  # stated: no warning of its own
    }
    assert run_program(config, [], "engine").warnings == []
    result = cli("--stack", "barcelona", "--out", str(tmp_path))  # has kubernetes:context
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr


# --- in a project of another name ------------------------------------------------------------
# The package's settings are `gpu-cluster:` keys in any project, as a provider's are under its
# own namespace; the project's namespace holds the keys of the user's own program.


def _project_of_another_name(tmp_path: Path, stack_text: str) -> Path:
    """The package's program in a Pulumi project named team-space, with stack `dev`."""
    project = program_copy(tmp_path / "team-space", {"dev": stack_text})
    (project / "Pulumi.yaml").write_text("name: team-space\nruntime: python\n")
    return project


def test_in_a_project_of_another_name_the_settings_draw_no_warning(tmp_path: Path) -> None:
    barcelona = (ROOT / "Pulumi.barcelona.yaml").read_text()
    project = read_project(_project_of_another_name(tmp_path, barcelona))
    warnings: list[str] = []
    run = program_run("dev", warn=warnings.append, project=project)
    assert run.of_type("kubernetes:apps/v1:StatefulSet")
    assert [w for w in warnings if "not read" in w] == []


def test_settings_under_the_project_s_name_are_refused_with_the_namespace_to_use(
    tmp_path: Path,
) -> None:
    barcelona = (ROOT / "Pulumi.barcelona.yaml").read_text()
    renamed = barcelona.replace("\n  gpu-cluster:", "\n  team-space:")
    project = read_project(_project_of_another_name(tmp_path, renamed))
    # The program stops with the message; the CLI prints it and exits 2.
    with pytest.raises(pulumi.RunError) as info:
        program_run("dev", project=project)
    assert "team-space:platform" in str(info.value)
    assert "write them as gpu-cluster:" in str(info.value)


def test_a_key_of_its_own_program_that_nothing_reads_is_a_warning(tmp_path: Path) -> None:
    project = (tmp_path / "team-space").resolve()
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: team-space\nruntime: python\n")
    (project / "__main__.py").write_text(
        "import pulumi\npulumi.export('nodes', pulumi.Config().get_int('nodes'))\n"
    )
    (project / "Pulumi.dev.yaml").write_text("config:\n  team-space:nodes: 2\n")
    warnings: list[str] = []
    run = program_run("dev", ("nodse=3",), warn=warnings.append, project=read_project(project))
    assert run.outputs == {"nodes": 2}
    assert warnings == [
        "team-space:nodse: set, but the program never read it with pulumi.Config "
        "(did you mean team-space:nodes?); ignored"
    ]
    warnings.clear()
    program_run("dev", ("nodes=3",), warn=warnings.append, project=read_project(project))
    assert warnings == []


# --- keys the stack would lose outside its own namespace -------------------------------------


def test_a_key_beside_config_is_refused_in_the_render(tmp_path: Path) -> None:
    """The Pulumi CLI passes on only what is under `config:` (and drops the rest when it rewrites
    the file: shown on the real CLI in tests/real/test_pulumi_config.py)."""
    stack = "gpu-cluster:nodes: 4\nconfig:\n  gpu-cluster:platform: openshift\n"
    message = refused_stack_file(tmp_path, stack)
    assert "gpu-cluster:nodes is beside `config:`, not under it" in message


def test_a_key_beside_config_stops_the_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `pulumi up` the program reads its stack file from the project directory (its
    working directory) for what the engine does not pass on."""
    (tmp_path / "Pulumi.engine.yaml").write_text("gpu-cluster:nodes: 4\nconfig: {}\n")
    monkeypatch.chdir(tmp_path)
    run = ProgramRun()
    with pytest.raises(pulumi.RunError) as info:
        run_program({"gpu-cluster:platform": "openshift"}, [], "engine", record_into=run)
    assert run.resources == []
    assert "gpu-cluster:nodes is beside `config:`" in str(info.value)


# Each provider's settings the other platform never reads, and near misses of real settings.
OTHER_PLATFORM = [("gke", "kubernetes:context", "barcelona"), ("openshift", "gcp:project", "p-1")]
MISSPELT_SETTINGS = [("openshift", "kubernetes:contxt"), ("gke", "gcp:projet")]


@pytest.mark.parametrize(("platform", "key", "value"), OTHER_PLATFORM)
def test_a_provider_key_the_platform_never_reads_is_refused(
    platform: str, key: str, value: str
) -> None:
    stack = "gcp-a3" if platform == "gke" else "nerc-production"
    config, secret_keys = engine_config(stack)
    config[key] = value
    run = ProgramRun()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, secret_keys, stack, record_into=run)
    assert run.resources == []
    assert f"{key} is only read on platform" in str(info.value)


@pytest.mark.parametrize(("platform", "key"), MISSPELT_SETTINGS)
def test_a_misspelt_provider_setting_is_refused(platform: str, key: str) -> None:
    stack = "gcp-a3" if platform == "gke" else "nerc-production"
    config, secret_keys = engine_config(stack)
    config[key] = "x"
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, secret_keys, stack, record_into=ProgramRun())
    assert f"{key} is not a setting of the" in str(info.value)


def test_every_setting_of_the_platforms_provider_is_accepted() -> None:
    """Generated from the providers' own SDKs: none of their settings is taken for a typo."""
    for stack, provider in (("nerc-production", "kubernetes"), ("gcp-a3", "gcp")):
        config, _ = engine_config(stack)
        keys = [f"{provider}:{name}" for name in PROVIDER_SETTINGS[provider]]
        assert (
            provider_key_problems(
                [*config, *keys], config["gpu-cluster:platform"], PROVIDER_SETTINGS
            )
            == []
        )
