"""One `pulumi` operation on a stack, its program run as an Automation API inline program
(tools/realtier/engine.py starts it with a JSON request as its argument and reads the result
file it names). Run as a script from the program's directory, which the program imports from:
it needs only the Pulumi SDK, so an older checkout's program runs as it was.
"""

from __future__ import annotations

import json
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
    runs: list[tuple[bool, list[str]]] = []
    for override in overrides:
        removal = override.startswith("!")
        if not runs or runs[-1][0] != removal:
            runs.append((removal, []))
        runs[-1][1].append(override)
    for removal, run in runs:
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


if __name__ == "__main__":
    _request = json.loads(sys.argv[1])
    # The program's directory first, not this script's (Python puts the script's there).
    sys.path[0] = str(Path(_request["program"]).parent)
    Path(_request["result"]).write_text(json.dumps(_serve(_request)))
