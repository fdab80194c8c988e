"""`pulumi up`, `preview` and `destroy` of a stack through the real Pulumi engine: the built CLI
and Kubernetes provider plugin, a file backend and the passphrase secrets provider, against the
tier's API server.

The Python language host is not served by the module proxy (build.py), so the program runs as
the Automation API runs an inline program: the SDK serves the language runtime itself and the CLI
connects to it (`--client`, pulumi/pulumi sdk/python/lib/pulumi/automation/_stack.py). Each
operation is a process of its own (`python -m tools.realtier.engine REQUEST`), as a language host
would start the program anew for each; it runs the project's `__main__.py` unchanged.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.realtier.build import Tools
from tools.realtier.pulumi_cli import PulumiCli

PROJECT_DIR = Path(__file__).resolve().parents[2]  # Pulumi.yaml, Pulumi.<stack>.yaml, __main__.py


@dataclass(frozen=True)
class Step:
    """One resource's step as the engine announced it (its ResourcePreEvent)."""

    op: str  # same, create, update, replace, delete, ...
    urn: str
    type: str
    diffs: tuple[str, ...]  # the properties that differ
    replace_keys: tuple[str, ...]  # the properties that force a replacement

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[1]


@dataclass(frozen=True)
class Outcome:
    steps: list[Step]
    outputs: dict[str, Any]
    diagnostics: list[str]  # the engine's and the provider's messages, "severity: message"
    error: str | None  # why the operation failed, None when it succeeded

    def ops(self, *ops: str) -> list[Step]:
        return [s for s in self.steps if s.op in ops]


class EngineError(RuntimeError):
    pass


def stack_kubeconfig(
    admin_kubeconfig: Path, context: str, target: Path, user: dict[str, str] | None = None
) -> Path:
    """A copy of the tier's kubeconfig whose one context is named `context` (the name a stack's
    `kubernetes:context`, or the GKE credentials, gives its cluster), as the admin or with
    `user`'s credentials (a kubeconfig `user` entry, e.g. a token)."""
    config = yaml.safe_load(admin_kubeconfig.read_text())
    (entry,) = config["contexts"]
    entry["name"] = config["current-context"] = context
    if user is not None:
        (credentials,) = config["users"]
        credentials["user"] = user
    target.write_text(yaml.safe_dump(config))
    return target


class Engine:
    """One stack of the project in a directory of its own: its stack file copied there, its
    state in a file backend there, the built provider as the ambient `kubernetes` plugin."""

    def __init__(self, tools: Tools, workdir: Path, stack: str, kubeconfig: Path) -> None:
        self.stack = stack
        self.project_dir = workdir / "project"
        self.project_dir.mkdir(parents=True, exist_ok=True)
        for name in ("Pulumi.yaml", f"Pulumi.{stack}.yaml"):
            shutil.copyfile(PROJECT_DIR / name, self.project_dir / name)
        self.pulumi_root = tools.binary("pulumi").parent.parent  # PulumiCommand(root=): bin/pulumi
        provider_dir = tools.binary("pulumi-resource-kubernetes").parent
        self.cli = PulumiCli(tools, self.project_dir, workdir / "state")
        self.env = {
            **self.cli.env,
            "PATH": f"{provider_dir}{os.pathsep}{os.environ['PATH']}",
            "KUBECONFIG": str(kubeconfig),
        }

    def _run(
        self,
        op: str,
        overrides: tuple[str, ...],
        check: bool = True,
        secrets: dict[str, str] | None = None,
    ) -> Outcome:
        result_file = self.project_dir / f"{op}.json"
        request = {
            "op": op,
            "stack": self.stack,
            "project_dir": str(self.project_dir),
            "pulumi_root": str(self.pulumi_root),
            "overrides": list(overrides),
            "secrets": secrets or {},
            "result": str(result_file),
        }
        result = subprocess.run(
            [sys.executable, "-m", "tools.realtier.engine", json.dumps(request)],
            cwd=PROJECT_DIR,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            failed = result.stderr[-6000:]
            raise EngineError(f"the engine driver failed ({op}, {self.stack}):\n{failed}")
        found = json.loads(result_file.read_text())
        outcome = Outcome(
            steps=[
                Step(s["op"], s["urn"], s["type"], tuple(s["diffs"]), tuple(s["replace_keys"]))
                for s in found["steps"]
            ],
            outputs=found["outputs"],
            diagnostics=found["diagnostics"],
            error=found["error"],
        )
        if check and outcome.error is not None:
            raise EngineError(f"pulumi {op} of {self.stack} failed:\n{outcome.error[-6000:]}")
        return outcome

    def up(self, *overrides: str, secrets: dict[str, str] | None = None) -> Outcome:
        """`pulumi config set --path` each `key=value` (a key of the project's unless it names
        its namespace), `pulumi config rm` each `!key`, `pulumi config set --secret --path`
        each of `secrets`, then `pulumi up`."""
        return self._run("up", overrides, secrets=secrets)

    def preview(self, *overrides: str, check: bool = True) -> Outcome:
        """`pulumi preview` of the stack with the overrides, which are then undone (the stack
        file is as before); with check=False a refused preview (a protected resource the edit
        would replace or delete) returns its steps and error instead of raising."""
        deployed = self.stack_file.read_bytes()
        try:
            return self._run("preview", overrides, check)
        finally:
            self.stack_file.write_bytes(deployed)

    def destroy(self, *, exclude_protected: bool = False, check: bool = True) -> Outcome:
        """`pulumi destroy` (`--exclude-protected`); check=False returns a refused one."""
        return self._run("destroy-exclude-protected" if exclude_protected else "destroy", (), check)

    def export(self) -> dict[str, Any]:
        """`pulumi stack export` (without `--show-secrets`, which the Automation API's export
        adds): the state's deployment as the backend stores it."""
        exported = json.loads(self.cli.run("stack", "export", "--stack", self.stack))
        return dict(exported["deployment"])

    @property
    def stack_file(self) -> Path:
        return self.project_dir / f"Pulumi.{self.stack}.yaml"


def _serve(request: dict[str, Any]) -> dict[str, Any]:
    """The driver's side, in its own process: one Automation API operation on the stack."""
    from pulumi import automation as auto

    def program() -> None:
        runpy.run_path(str(PROJECT_DIR / "__main__.py"), run_name="__main__")

    stack = auto.create_or_select_stack(
        request["stack"],
        project_name="gpu-cluster",
        program=program,
        opts=auto.LocalWorkspaceOptions(
            work_dir=request["project_dir"],
            pulumi_command=auto.PulumiCommand(root=request["pulumi_root"]),
        ),
    )
    for override in request["overrides"]:
        if override.startswith("!"):
            stack.remove_config(_qualified(override[1:]))
        else:
            key, value = override.split("=", 1)
            stack.set_config(_qualified(key), auto.ConfigValue(value), path=True)
    for key, value in request["secrets"].items():
        stack.set_config(_qualified(key), auto.ConfigValue(value, secret=True), path=True)
    steps: list[dict[str, Any]] = []
    diagnostics: list[str] = []

    def on_event(event: auto.EngineEvent) -> None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            steps.append(
                {
                    "op": str(meta.op.value),
                    "urn": meta.urn,
                    "type": meta.type,
                    "diffs": list(meta.diffs or []),
                    "replace_keys": list(meta.keys or []) if meta.op.value in _REPLACING else [],
                }
            )
        if event.diagnostic_event is not None:
            diag = event.diagnostic_event
            diagnostics.append(f"{diag.severity}: {diag.message.strip()}")

    outputs: dict[str, Any] = {}
    error = None
    op = request["op"]
    try:
        if op == "up":
            result = stack.up(on_event=on_event)
            outputs = {k: v.value for k, v in result.outputs.items()}
        elif op == "preview":
            stack.preview(on_event=on_event)
        elif op in ("destroy", "destroy-exclude-protected"):
            stack.destroy(on_event=on_event, exclude_protected=op != "destroy")
        else:
            raise ValueError(f"unknown operation {op!r}")
    except auto.errors.CommandError as failed:
        error = str(failed)
    return {"steps": steps, "outputs": outputs, "diagnostics": diagnostics, "error": error}


def _qualified(key: str) -> str:
    return key if ":" in key else f"gpu-cluster:{key}"


# The ops whose event names the properties that force the replacement (its `keys`).
_REPLACING = ("replace", "create-replacement", "delete-replaced")

if __name__ == "__main__":
    _request = json.loads(sys.argv[1])
    Path(_request["result"]).write_text(json.dumps(_serve(_request)))
