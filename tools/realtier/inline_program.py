"""One `pulumi` operation on a stack, its program run as an Automation API inline program.

tools/realtier/engine.py runs `run_operation` in a process of its own, forked from a server
that has imported the Pulumi SDK's modules (`PRELOADED`), so no operation pays for those
imports again. That server imports nothing of the program: the operation's process runs the
project's `__main__.py` from the program's directory, whose `gpu_cluster` it imports itself,
so an older checkout's program runs as it was.
"""

from __future__ import annotations

import itertools
import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

from pulumi import automation as auto
from semver import VersionInfo


def _qualified(key: str) -> str:
    return key if ":" in key else f"gpu-cluster:{key}"


class _BuiltPulumi(auto.PulumiCommand):
    """The tier's built CLI, whose version the caller knows: PulumiCommand's own __init__ runs
    `pulumi version` to learn it, a process per operation (sdk/python/lib/pulumi/automation/
    _cmd.py); `run` needs only these two attributes."""

    def __init__(self, root: str, version: str) -> None:  # no super().__init__: see above
        self.command = str(Path(root) / "bin" / "pulumi")
        self.version = VersionInfo.parse(version.removeprefix("v"))


def _set_config(stack: auto.Stack, overrides: list[str], secrets: dict[str, str]) -> None:
    """`pulumi config rm --path` each `!key`, `pulumi config set --path` each `key=value`, in
    order, then each secret with `--secret`: each run of removals or of values is one
    `config rm-all --path` or `config set-all --path` (the same `Config.Set(key, value, path)`
    per key: pulumi/pulumi v3.259.0 pkg/cmd/pulumi/config/config.go), not a process per key."""
    for removal, grouped in itertools.groupby(overrides, key=lambda o: o.startswith("!")):
        run = list(grouped)
        if removal:
            stack.remove_all_config([_qualified(o[1:]) for o in run], path=True)
        else:
            values = dict(o.split("=", 1) for o in run)
            stack.set_all_config(
                {_qualified(k): auto.ConfigValue(v) for k, v in values.items()}, path=True
            )
    if secrets:
        stack.set_all_config(
            {_qualified(k): auto.ConfigValue(v, secret=True) for k, v in secrets.items()},
            path=True,
        )


def _serve(request: dict[str, Any]) -> dict[str, Any]:
    def program() -> None:
        runpy.run_path(request["program"], run_name="__main__")

    stack = auto.create_or_select_stack(
        request["stack"],
        project_name="gpu-cluster",
        program=program,
        opts=auto.LocalWorkspaceOptions(
            work_dir=request["project_dir"],
            pulumi_command=_BuiltPulumi(request["pulumi_root"], request["pulumi_version"]),
        ),
    )
    _set_config(stack, request["overrides"], request["secrets"])
    steps: list[dict[str, Any]] = []
    violations: list[dict[str, str]] = []

    def on_event(event: auto.EngineEvent) -> None:
        if event.policy_event is not None:
            policy = event.policy_event
            violations.append(
                {
                    "policy": policy.policy_name,
                    "urn": policy.resource_urn or "",
                    "enforcement": policy.enforcement_level,
                    "message": policy.message,
                }
            )
            return
        # The engine numbers its events in the order they happen (`sequence`); a step starts
        # with its ResourcePreEvent and ends with its ResOutputsEvent or ResOpFailedEvent.
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            steps.append(
                {
                    "op": str(meta.op.value),
                    "urn": meta.urn,
                    "type": meta.type,
                    "diffs": list(meta.diffs or []),
                    "started": event.sequence,
                    "finished": None,
                    "failed": False,
                }
            )
            return
        ended = event.res_outputs_event or event.res_op_failed_event
        if ended is not None:
            meta = ended.metadata
            op = str(meta.op.value)
            for step in reversed(steps):
                if step["urn"] == meta.urn and step["op"] == op and step["finished"] is None:
                    step["finished"] = event.sequence
                    step["failed"] = event.res_op_failed_event is not None
                    break

    outputs: dict[str, Any] = {}
    error = None
    op = request["op"]
    try:
        if op == "up":
            result = stack.up(on_event=on_event)
            outputs = {k: v.value for k, v in result.outputs.items()}
        elif op == "preview":
            stack.preview(on_event=on_event, policy_packs=request["policy_packs"] or None)
        elif op in ("destroy", "destroy-exclude-protected"):
            stack.destroy(on_event=on_event, exclude_protected=op != "destroy")
        else:
            raise ValueError(f"unknown operation {op!r}")
    except auto.errors.CommandError as failed:
        error = str(failed)
    return {"steps": steps, "outputs": outputs, "error": error, "violations": violations}


def run_operation(request: dict[str, Any]) -> None:
    """In the operation's own process: its output to the request's log, the engine's
    environment, the program's directory as the current one and first on the import path
    (the SDK's CLI and the program read them), then the operation; its result file says how
    it went."""
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for stream in (1, 2):
        os.dup2(log, stream)
    os.environ.clear()
    os.environ.update(request["env"])
    program_dir = str(Path(request["program"]).parent)
    os.chdir(program_dir)
    sys.path.insert(0, program_dir)
    Path(request["result"]).write_text(json.dumps(_serve(request)))


# What an OpenShift stack's program imports of the SDK (its Kubernetes groups load their
# modules on first use); a module missing here is imported by the operation itself.
PRELOADED = (
    "pulumi.automation",
    "pulumi_kubernetes.admissionregistration.v1",
    "pulumi_kubernetes.apiextensions",
    "pulumi_kubernetes.apps.v1",
    "pulumi_kubernetes.batch.v1",
    "pulumi_kubernetes.core.v1",
    "pulumi_kubernetes.meta.v1",
    "pulumi_kubernetes.networking.v1",
    "pulumi_kubernetes.rbac.v1",
    "pydantic",
    "yaml",
)
