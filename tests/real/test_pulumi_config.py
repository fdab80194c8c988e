"""The offline render reads stack files as the Pulumi CLI does: every shipped stack file, and a
stack file for each scalar YAML 1.1 and go-yaml v3 read differently, gives the same config
through the real CLI (`pulumi config --json`) as through the offline engine's reader (or both
refuse it); `--set` stores values as `pulumi config set --path` does."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.config.messages import ConfigError
from gpu_cluster.offline.config_path import apply_override
from gpu_cluster.offline.goyaml import engine_text
from gpu_cluster.offline.new_stack import new_stack, stack_file_text
from gpu_cluster.offline.project import read_project
from gpu_cluster.offline.stack_files import engine_config, stack_file_config
from tests.as_of import AS_OF
from tests.cli import by_case
from tests.conftest import ROOT, STACKS
from tests.real.conftest import on_one_worker
from tests.stack_scalars import (
    READ_AS_WRITTEN,
    SCALARS,
    SET_VALUES,
    Expected,
    Refused,
    Rewritten,
    expected_values,
    parsed,
    stack_file,
    values,
)
from tools.realtier.build import Tools
from tools.realtier.pulumi_cli import PulumiCli

pytestmark = [pytest.mark.real, on_one_worker(__name__)]


def cli_values(listing: dict[str, Any]) -> dict[str, Any]:
    return {
        key: entry["objectValue"] if "objectValue" in entry else entry.get("value")
        for key, entry in listing.items()
    }


def offline_values(stack: str, project_dir: Path) -> dict[str, Any]:
    config, _secret = engine_config(stack, project_dir=project_dir)
    out: dict[str, Any] = {}
    for key, text in config.items():
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        out[key] = value if isinstance(value, (dict, list)) else text
    return out


def project_with(stacks: dict[str, str], directory: Path) -> Path:
    directory.mkdir()
    shutil.copyfile(ROOT / "Pulumi.yaml", directory / "Pulumi.yaml")
    for name, text in stacks.items():
        (directory / f"Pulumi.{name}.yaml").write_text(text, encoding="utf-8")
    return directory


def compare(tools: Tools, tmp_path: Path, stacks: dict[str, str]) -> None:
    # The CLI rewrites a stack file on `stack init` (it adds the passphrase salt): it gets a
    # copy, the offline reader the original text.
    offline_dir = project_with(stacks, tmp_path / "offline")
    cli = PulumiCli(tools, project_with(stacks, tmp_path / "cli"), tmp_path / "pulumi")
    for stack in stacks:
        cli.run("stack", "init", stack)
        assert offline_values(stack, offline_dir) == cli_values(cli.config(stack)), stack


def test_shipped_stack_files_read_the_same_through_the_cli(tools: Tools, tmp_path: Path) -> None:
    compare(tools, tmp_path, {s: (ROOT / f"Pulumi.{s}.yaml").read_text() for s in STACKS})


def test_the_files_gpu_cluster_new_writes_read_the_same_through_the_cli(
    tools: Tools, tmp_path: Path
) -> None:
    """What `gpu-cluster new` writes (tests/test_new_stack.py: the offline reader reads it back
    as the config meant): every shipped stack written anew with its kind, and a JobSet stack."""
    project = read_project(ROOT)

    def kept(stack: str) -> tuple[str, ...]:
        """The kind the shipped file states (gcp-a4 `jobset`, the others `statefulset`)."""
        return (f"workload.kind={stack_file_config(stack, ROOT)['gpu-cluster:workload']['kind']}",)

    written = {
        f"{s}-anew": new_stack(project, f"{s}-anew", s, kept(s), as_of=AS_OF) for s in STACKS
    }
    command = ("workload.command[0]=/workspace/train.py", "name=team-b")
    written["team-b"] = new_stack(project, "team-b", "nerc-production", command, as_of=AS_OF)
    compare(tools, tmp_path, {name: stack.text for name, stack in written.items()})


# --- scalars YAML 1.1 and go-yaml v3 read differently (tests/stack_scalars.py) ---------------


@pytest.fixture(scope="module")
def scalar_stack(tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> PulumiCli:
    """A project with the stack `given`, whose file each test writes."""
    root = tmp_path_factory.mktemp("scalars")
    cli = PulumiCli(tools, project_with({}, root / "cli"), root / "pulumi")
    cli.run("stack", "init", "given")
    return cli


@by_case("scalar, expected", SCALARS)
def test_ambiguous_scalars_read_the_same_through_the_cli(
    scalar_stack: PulumiCli, tmp_path: Path, scalar: str, expected: Expected
) -> None:
    """Each scalar top-level, in a map and in a list: the CLI and the offline reader both refuse
    the stack file or give the program the same values; where the CLI would hand it something
    else than what is written (a timestamp), the offline reader refuses it."""
    text = stack_file(scalar)
    (scalar_stack.project_dir / "Pulumi.given.yaml").write_text(text, encoding="utf-8")
    offline_dir = project_with({"given": text}, tmp_path / "offline")
    try:
        listing = scalar_stack.config("given")
    except RuntimeError as exc:
        cli_refused: str | None = str(exc)
    else:
        cli_refused = None
        cli = values({key: entry["value"] for key, entry in listing.items()})
    try:
        config, _ = engine_config("given", project_dir=offline_dir)
    except ConfigError as exc:
        offline_refused: str | None = str(exc)
    else:
        offline_refused = None
        offline = values(config)
    if isinstance(expected, Refused):
        assert cli_refused and offline_refused, (cli_refused, offline_refused)
        assert expected.says in offline_refused
    elif isinstance(expected, Rewritten):
        assert cli_refused is None and offline_refused, (cli_refused, offline_refused)
        assert cli == expected_values(expected.cli)
        assert expected.says in offline_refused
    else:
        assert cli_refused is None and offline_refused is None, (cli_refused, offline_refused)
        assert offline == cli == expected_values(expected)


def test_every_value_gpu_cluster_new_writes_reads_the_same_through_the_cli(
    scalar_stack: PulumiCli, tmp_path: Path
) -> None:
    """One file of every value both readers read alike, as `gpu-cluster new` writes it (quoting
    what go-yaml v3 would read as another type): the CLI hands the program the same text as the
    offline reader (which reads it back as the source's values: tests/test_new_stack.py)."""
    scalars: dict[str, Any] = {}
    for index, (_case, scalar) in enumerate(READ_AS_WRITTEN):
        (tmp_path / "Pulumi.scalar.yaml").write_text(stack_file(scalar), encoding="utf-8")
        for key, value in stack_file_config("scalar", tmp_path).items():
            scalars[f"{key}{index}"] = value
    text = stack_file_text(scalars)
    (scalar_stack.project_dir / "Pulumi.given.yaml").write_text(text, encoding="utf-8")
    cli = {key: entry["value"] for key, entry in scalar_stack.config("given").items()}
    offline, _ = engine_config("given", project_dir=project_with({"given": text}, tmp_path / "o"))
    assert len(scalars) == 3 * len(READ_AS_WRITTEN)

    def program_values(config: dict[str, str]) -> dict[str, Any]:
        """The file's own keys (not Pulumi.yaml's defaults), JSON values parsed."""
        return {
            k: parsed(v) if v[:1] in ("{", "[") else v for k, v in config.items() if k in scalars
        }

    assert program_values(cli) == program_values(offline)
    assert len(program_values(cli)) == len(scalars)


def test_set_path_values_are_stored_as_pulumi_config_set_path_stores_them(
    tools: Tools, tmp_path: Path
) -> None:
    """`--set a.b=VALUE` and `--set-secret a.b=VALUE` give the program what `pulumi config set
    [--secret] --path a.b VALUE` does."""
    cli = PulumiCli(tools, project_with({}, tmp_path / "cli"), tmp_path / "pulumi")
    cli.run("stack", "init", "set")
    offline: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for index, (_case, value, _stored) in enumerate(SET_VALUES):
        cli.run("config", "set", "--path", "--stack", "set", positional=(f"s{index}.x", value))
        apply_override(offline, f"s{index}.x={value}")
        cli.run(
            "config",
            "set",
            "--secret",
            "--path",
            "--stack",
            "set",
            positional=(f"t{index}.x", value),
        )
        apply_override(secrets, f"t{index}.x={value}", secret=True)
    listing = json.loads(cli.run("config", "--json", "--show-secrets", "--stack", "set"))
    ours = re.compile(r"gpu-cluster:[st][0-9]+")
    got = {k: parsed(entry["value"]) for k, entry in listing.items() if ours.fullmatch(k)}
    want = {key: parsed(engine_text(value)) for key, value in {**offline, **secrets}.items()}
    assert got == want
    assert [got[f"gpu-cluster:s{i}"]["x"] for i in range(len(SET_VALUES))] == [
        parsed(json.dumps(stored)) for _, _, stored in SET_VALUES
    ]


def test_a_key_beside_config_never_reaches_the_program(tools: Tools, tmp_path: Path) -> None:
    """Why the offline reader and the program refuse it (tests/test_ignored_config.py): the real
    CLI passes on only what is under `config:`, and drops the rest when it rewrites the file."""
    text = "gpu-cluster:nodes: 4\nconfig:\n  gpu-cluster:platform: openshift\n"
    cli = PulumiCli(tools, project_with({"beside": text}, tmp_path / "cli"), tmp_path / "pulumi")
    cli.run("stack", "init", "beside")
    seen = cli_values(cli.config("beside"))
    assert seen["gpu-cluster:platform"] == "openshift"
    assert seen.get("gpu-cluster:nodes") != "4"  # Pulumi.yaml's default, if any, not the 4
    assert "gpu-cluster:nodes" not in (tmp_path / "cli" / "Pulumi.beside.yaml").read_text()
    with pytest.raises(ConfigError, match="gpu-cluster:nodes is beside `config:`"):
        offline_values("beside", project_with({"beside": text}, tmp_path / "offline"))
