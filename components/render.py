"""Offline render: the desired state of a stack, with no CLI, cloud or cluster.

    python -m components.render --stack barcelona --out out/barcelona [--set nodes=4] [--diff OLD]

Runs `__main__.py` in-process under the Pulumi SDK's mock engine with the stack's config and
writes `kubernetes.yaml` (every Kubernetes object, in apply order), `resources.json` (every
registered resource with inputs and options) and `outputs.json` (stack outputs). Exit codes:
0 rendered (with --diff: no change), 1 --diff found changes, 2 bad config or usage.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from components.offline import ProgramRun, engine_config, run_program
from components.settings import PROJECT, ConfigError
from components.stack_config import settings_from

# Apply order: namespaces and cluster-scoped prerequisites first, then what refers to them.
KIND_ORDER = (
    "Namespace",
    "SecurityContextConstraints",
    "GKENetworkParamSet",
    "Network",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "NetworkAttachmentDefinition",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "Service",
    "NetworkPolicy",
    "DaemonSet",
    "StatefulSet",
    "Job",
)
FILES = ("kubernetes.yaml", "resources.json", "outputs.json")


def _kind_rank(manifest: dict[str, Any]) -> tuple[int, str, str, str]:
    kind = manifest.get("kind", "")
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    meta = manifest.get("metadata", {})
    return rank, kind, meta.get("namespace", ""), meta.get("name", "")


# libyaml's emitter when PyYAML has it: the same output, several times faster.
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """Multi-line strings (scripts, CNI JSON, hostfiles) as readable literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def kubernetes_yaml(run: ProgramRun) -> str:
    docs = sorted(run.manifests(), key=_kind_rank)
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=100)


def resources_json(run: ProgramRun) -> str:
    rows = [
        {
            "type": r.type,
            "name": r.name,
            "parent": r.parent.split("::")[-1] if r.parent else "",
            "inputs": r.inputs,
            "options": r.options,
        }
        for r in run.resources
    ]
    return json.dumps(rows, indent=2, sort_keys=True) + "\n"


def render(
    stack: str, overrides: tuple[str, ...] = (), secret_overrides: tuple[str, ...] = ()
) -> dict[str, str]:
    """File name -> content for one stack; raises ConfigError for bad config."""
    config, secret_keys = engine_config(stack, overrides, secret_overrides)
    prefix = PROJECT + ":"
    # Validate first, so bad config writes nothing and reads as a config error.
    settings_from(
        {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}, secret_keys
    )
    run = run_program(config, secret_keys, stack)
    return {
        "kubernetes.yaml": kubernetes_yaml(run),
        "resources.json": resources_json(run),
        "outputs.json": json.dumps(run.outputs, indent=2, sort_keys=True) + "\n",
    }


def diff(old_dir: Path, files: dict[str, str]) -> str:
    out: list[str] = []
    for name in FILES:
        old_path = old_dir / name
        old = old_path.read_text().splitlines(keepends=True) if old_path.exists() else []
        out.extend(
            difflib.unified_diff(
                old, files[name].splitlines(keepends=True), f"{old_dir}/{name}", f"new/{name}"
            )
        )
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components.render", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--stack", required=True, help="stack name (reads Pulumi.<stack>.yaml)")
    parser.add_argument("--out", type=Path, help="directory to write the render to")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key as `pulumi config set [--path]` would (repeatable)",
    )
    parser.add_argument(
        "--set-secret",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="like --set, as `pulumi config set --secret` (rendered as a redacted placeholder)",
    )
    parser.add_argument(
        "--diff", type=Path, metavar="OLD_DIR", help="diff against an earlier render"
    )
    args = parser.parse_args(argv)
    if args.out is None and args.diff is None:
        parser.error("give --out DIR, --diff OLD_DIR, or both")
    try:
        files = render(args.stack, tuple(args.set), tuple(args.set_secret))
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (args.out / name).write_text(content)
        print(f"rendered stack {args.stack!r} to {args.out}/ ({', '.join(FILES)})", file=sys.stderr)
    if args.diff is not None:
        changes = diff(args.diff, files)
        sys.stdout.write(changes)
        return 1 if changes else 0
    return 0


if __name__ == "__main__":
    exit_code = main()
    # Everything is written: skip the interpreter's teardown of the SDK's modules, a third of
    # the command's time (bench/profile_render.py, section 4).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
