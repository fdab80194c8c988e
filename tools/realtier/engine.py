"""`pulumi up`, `preview` and `destroy` of a stack through the real Pulumi engine: the built CLI
and Kubernetes provider plugin, a file backend and the passphrase secrets provider, against the
tier's API server.

The Python language host is not served by the module proxy (build.py), so the program runs as
the Automation API runs an inline program: the SDK serves the language runtime itself and the CLI
connects to it (`--client`, pulumi/pulumi sdk/python/lib/pulumi/automation/_stack.py). Each
operation is a process of its own (inline_program.py), as a language host would start the
program anew for each; it runs a project's `__main__.py` unchanged, this checkout's or an older
one's (`program_dir`). The processes are forked from a multiprocessing fork server that has
imported the SDK: a preview's driver took 1.45 CPU s started anew, 0.55 s forked (process
accounting over engine-previews' 24 operations, 2026-11-30).

A preview may run a policy pack (`pulumi preview --policy-pack DIR`). The CLI starts a Python
pack through the language host, or, where there is none, through the `pulumi-analyzer-policy-
python` plugin on PATH (pulumi/pulumi v3.259.0 pkg/resource/plugin/analyzer_plugin.go
NewPolicyAnalyzer), which it runs in the pack's directory with the engine's address and `.`. The
language host is not built here (above), so the engine gets that plugin: the launcher pulumi
shipped as sdk/python/dist/pulumi-analyzer-policy-python (507db165; `python3 -u -m
pulumi.policy "$1" "$2"`, gone from v3.259.0's sdk, where the language host starts packs), with
this interpreter (which has the pack's requirements) in place of the pack's own virtualenv. The
engine then sends the pack each registration and enforces its verdicts.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.realtier.build import PULUMI_VERSION, Tools
from tools.realtier.inline_program import PRELOADED, run_operation
from tools.realtier.pulumi_cli import PulumiCli

PROJECT_DIR = Path(__file__).resolve().parents[2]  # Pulumi.yaml, Pulumi.<stack>.yaml, __main__.py
_FORK_SERVER = multiprocessing.get_context("forkserver")
_FORK_SERVER.set_forkserver_preload(list(PRELOADED))


@dataclass(frozen=True)
class Step:
    """One resource's step as the engine announced it (its ResourcePreEvent)."""

    op: str  # same, create, update, replace, delete, ...
    urn: str
    type: str
    diffs: tuple[str, ...]  # the properties that differ
    # When it started and ended, as the engine numbers its events (their `sequence`): a step
    # that ends before another starts was done before that one began. None: it never ended.
    started: int
    finished: int | None
    failed: bool

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[1]


@dataclass(frozen=True)
class PolicyViolation:
    """A policy pack's verdict on a resource, as the engine reported it (its PolicyEvent)."""

    policy: str
    urn: str
    enforcement: str  # mandatory, advisory, ...
    message: str


@dataclass(frozen=True)
class Outcome:
    steps: list[Step]
    outputs: dict[str, Any]  # the stack's outputs (after `up`)
    error: str | None  # why the operation failed, None when it succeeded
    violations: list[PolicyViolation]  # what the policy packs reported (preview)

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

    def __init__(
        self,
        tools: Tools,
        workdir: Path,
        stack: str,
        kubeconfig: Path,
        program_dir: Path = PROJECT_DIR,
        stack_file_of: str | None = None,
    ) -> None:
        """`stack_file_of`: the shipped stack whose file this stack starts from (a second stack
        of the same settings under another name); its own by default."""
        self.stack = stack
        self.stack_file_of = stack_file_of or stack
        self.project_dir = workdir / "project"
        self.project_dir.mkdir(parents=True, exist_ok=True)
        self.use_program(program_dir)
        self.pulumi_root = tools.binary("pulumi").parent.parent  # PulumiCommand(root=): bin/pulumi
        provider_dir = tools.binary("pulumi-resource-kubernetes").parent
        self.cli = PulumiCli(tools, self.project_dir, workdir / "state")
        analyzer_dir = _policy_analyzer(workdir / "analyzers")
        self.env = {
            **self.cli.env,
            "PATH": os.pathsep.join((str(provider_dir), str(analyzer_dir), os.environ["PATH"])),
            "KUBECONFIG": str(kubeconfig),
        }

    def use_program(self, program_dir: Path) -> None:
        """Run `program_dir`'s program with its Pulumi.yaml and stack file from now on (the
        state stays): what checking out another release of the project does."""
        self.program_dir = program_dir
        shutil.copyfile(program_dir / "Pulumi.yaml", self.project_dir / "Pulumi.yaml")
        shutil.copyfile(program_dir / f"Pulumi.{self.stack_file_of}.yaml", self.stack_file)

    def _run(
        self,
        op: str,
        overrides: tuple[str, ...],
        check: bool = True,
        secrets: dict[str, str] | None = None,
        policy_packs: tuple[Path, ...] = (),
    ) -> Outcome:
        result_file = self.project_dir / f"{op}.json"
        log_file = self.project_dir / f"{op}.log"
        request = {
            "op": op,
            "stack": self.stack,
            "project_dir": str(self.project_dir),
            "program": str(self.program_dir / "__main__.py"),
            "pulumi_root": str(self.pulumi_root),
            "pulumi_version": PULUMI_VERSION,
            "overrides": list(overrides),
            "secrets": secrets or {},
            "policy_packs": [str(p) for p in policy_packs],
            "result": str(result_file),
            "log": str(log_file),
            "env": self.env,
        }
        log_file.unlink(missing_ok=True)
        operation = _FORK_SERVER.Process(target=run_operation, args=(request,))
        operation.start()
        operation.join()
        if operation.exitcode != 0:
            failed = (
                log_file.read_text(errors="replace")[-6000:]
                if log_file.exists()
                else f"exit code {operation.exitcode} before it opened {log_file}"
            )
            raise EngineError(f"the engine driver failed ({op}, {self.stack}):\n{failed}")
        found = json.loads(result_file.read_text())
        outcome = Outcome(
            steps=[Step(**{**s, "diffs": tuple(s["diffs"])}) for s in found["steps"]],
            outputs=found["outputs"],
            error=found["error"],
            violations=[PolicyViolation(**v) for v in found["violations"]],
        )
        if check and outcome.error is not None:
            raise EngineError(f"pulumi {op} of {self.stack} failed:\n{outcome.error[-6000:]}")
        return outcome

    def up(
        self, *overrides: str, secrets: dict[str, str] | None = None, check: bool = True
    ) -> Outcome:
        """`pulumi config set --path` each `key=value` (a key of the project's unless it names
        its namespace), `pulumi config rm` each `!key`, `pulumi config set --secret --path`
        each of `secrets`, then `pulumi up`; check=False returns a failed one."""
        return self._run("up", overrides, check, secrets)

    def preview(
        self, *overrides: str, check: bool = True, policy_packs: tuple[Path, ...] = ()
    ) -> Outcome:
        """`pulumi preview` of the stack with the overrides, which are then undone (the stack
        file is as before), with `--policy-pack` for each of `policy_packs`; with check=False a
        refused preview (a protected resource the edit would replace or delete, a mandatory
        policy violated) returns its steps and error instead of raising."""
        deployed = self.stack_file.read_bytes()
        try:
            return self._run("preview", overrides, check, policy_packs=policy_packs)
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


def _policy_analyzer(bin_dir: Path) -> Path:
    """Write the `pulumi-analyzer-policy-python` plugin into `bin_dir` (module docstring): run
    with the engine's address and the pack's directory, then the pack's runtime options (its
    `-virtualenv=`, which this interpreter stands in for); returns `bin_dir`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    plugin = bin_dir / "pulumi-analyzer-policy-python"
    plugin.write_text(f'#!/bin/sh\nexec "{sys.executable}" -u -m pulumi.policy "$1" "$2"\n')
    plugin.chmod(0o755)
    return bin_dir
