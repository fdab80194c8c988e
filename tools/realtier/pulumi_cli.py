"""The Pulumi CLI built for the real tier, run fully offline: a file backend and the passphrase
secrets provider in a directory of the caller's, no update check, no plugin downloads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tools.realtier.build import Tools
from tools.realtier.controlplane import tool_env

# A throwaway passphrase for test stacks' secrets (pkg/secrets/passphrase reads it from here).
TEST_PASSPHRASE = "realtier-test-passphrase"


class PulumiCli:
    def __init__(self, tools: Tools, project_dir: Path, state_dir: Path) -> None:
        self.binary = tools.binary("pulumi")
        self.project_dir = project_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        self.env = {
            **tool_env(),
            "PULUMI_HOME": str(state_dir / "home"),
            "PULUMI_BACKEND_URL": f"file://{state_dir / 'backend'}",
            "PULUMI_CONFIG_PASSPHRASE": TEST_PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        }
        (state_dir / "backend").mkdir(exist_ok=True)

    def run(self, *args: str, positional: tuple[str, ...] = ()) -> str:
        """`pulumi ARGS --non-interactive [-- POSITIONAL]`: positional arguments after `--`, so
        that a value like `-05` is not read as a flag."""
        tail = ("--", *positional) if positional else ()
        result = subprocess.run(
            [str(self.binary), *args, "--non-interactive", *tail],
            cwd=self.project_dir,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"pulumi {' '.join(args)} failed:\n{result.stderr}{result.stdout}")
        return result.stdout

    def config(self, stack: str) -> dict[str, Any]:
        """`pulumi config --json`: each key's value as the engine hands it to the program."""
        listing: dict[str, Any] = json.loads(self.run("config", "--json", "--stack", stack))
        return listing
