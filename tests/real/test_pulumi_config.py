"""The offline render reads stack files as the Pulumi CLI does: every shipped stack file gives
the same config through the real CLI (`pulumi config --json`) as through the offline engine's
reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.offline.engine import engine_config
from tests.conftest import ROOT, STACKS
from tools.realtier.build import Tools
from tools.realtier.pulumi_cli import PulumiCli

pytestmark = pytest.mark.real


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
