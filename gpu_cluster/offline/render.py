"""Offline render: the desired state of a stack, with no CLI, cloud or cluster.

Runs the project's `__main__.py` in-process under the Pulumi SDK's mock engine with the stack's
config and makes `kubernetes.yaml` (every Kubernetes object, in apply order), `resources.json`
(every registered resource with inputs and options) and `outputs.json` (stack outputs), written
all or nothing. A secret value it knows is written as a keyed digest (secret_digest), so that a
diff sees it change. The command line is gpu_cluster.offline.cli. The one date the checks depend
on (a GKE minor's end of standard support) is `as_of`'s, where an ended window is refused, so a
render can be repeated; by default today's (UTC), where it is a warning, as under `pulumi
preview`.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import yaml

from gpu_cluster.config.dates import AsOf, live
from gpu_cluster.offline import shapes
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.project import Project, read_project
from gpu_cluster.offline.secret_digest import MARKER
from gpu_cluster.offline.stack_files import checked_config
from gpu_cluster.offline.stack_yaml import YamlLoader

# Apply order: namespaces and cluster-scoped prerequisites first, then what refers to them.
KIND_ORDER = (
    "Namespace",
    "StorageClass",
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
    "Topology",
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "DaemonSet",
    "StatefulSet",
    "JobSet",
    "Job",
)
FILES = ("kubernetes.yaml", "resources.json", "outputs.json")


class ObjectMetadata(TypedDict):
    name: str


class KubernetesObject(TypedDict):
    """What every document of kubernetes.yaml has, whatever its kind: what the API server
    requires of any object (the program names each; none uses generateName)."""

    apiVersion: str
    kind: str
    metadata: ObjectMetadata


class ResourceRow(TypedDict):
    """One row of resources.json: a registered resource."""

    type: str
    name: str
    urn: str
    aliases: list[str]
    parent: str  # the parent's name, "" for none
    inputs: dict[str, Any]
    options: dict[str, Any]


# What each file holds (kubernetes.yaml: its documents). `--diff` checks an earlier render
# against it.
SHAPES: dict[str, Any] = {
    "kubernetes.yaml": list[KubernetesObject],
    "resources.json": list[ResourceRow],
    "outputs.json": dict[str, Any],
}


def kind_rank(manifest: dict[str, Any]) -> tuple[int, str, str, str]:
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
    docs = sorted(run.manifests(), key=kind_rank)
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=100)


def resources_json(run: ProgramRun) -> str:
    rows: list[ResourceRow] = [
        {
            "type": r.type,
            "name": r.name,
            "urn": r.urn,
            "aliases": list(r.aliases),
            "parent": r.parent.split("::")[-1] if r.parent else "",
            "inputs": r.inputs,
            "options": r.options,
        }
        for r in run.resources
    ]
    return json.dumps(rows, indent=2, sort_keys=True) + "\n"


def program_run(
    stack: str,
    overrides: tuple[str, ...] = (),
    secret_overrides: tuple[str, ...] = (),
    warn: Callable[[str], None] | None = None,
    project: Project | None = None,
    as_of: AsOf | None = None,
) -> ProgramRun:
    """The program run of one stack of `project` (this repository's by default), as the render
    makes it; raises ConfigError for bad config. Warnings (config nothing reads, a GKE minor near
    or past its end of support) go to `warn`. `as_of`: the date of the date-dependent checks
    (None: today's, which only warns)."""
    project = project if project is not None else read_project()
    as_of = as_of or live()  # one date for the check below and the program's own
    # Validated first, so bad config writes nothing and reads as a config error.
    config, secret_keys = checked_config(
        stack, overrides, secret_overrides, project.directory, warn, as_of
    )
    run = run_program(
        config, secret_keys, stack, project.program, project=project.name, as_of=as_of
    )
    if warn is not None:
        for warning in run.warnings:
            warn(warning)
    return run


def render(
    stack: str,
    overrides: tuple[str, ...] = (),
    secret_overrides: tuple[str, ...] = (),
    warn: Callable[[str], None] | None = None,
    project: Project | None = None,
    as_of: AsOf | None = None,
) -> dict[str, str]:
    """File name -> content for one stack (program_run's arguments)."""
    run = program_run(stack, overrides, secret_overrides, warn, project, as_of)
    return {
        "kubernetes.yaml": kubernetes_yaml(run),
        "resources.json": resources_json(run),
        "outputs.json": json.dumps(run.outputs, indent=2, sort_keys=True) + "\n",
    }


class OutputError(Exception):
    """An --out or --diff directory that cannot be used; the message names the path."""


def parse(name: str, text: str) -> Any:
    """A render file's content: kubernetes.yaml as its list of documents, the others as JSON.
    Raises ValueError or yaml.YAMLError for text that is neither."""
    if name.endswith(".json"):
        return json.loads(text)
    return list(yaml.load_all(text, Loader=YamlLoader))


def read_render(old_dir: Path, label: str = "--diff") -> dict[str, str]:
    """An earlier render's files, checked to be one (so a typo is not "everything added"): each
    file there, and holding what the render writes (SHAPES). `label`: how the command line
    names the directory, for messages (`--diff`, or `OLD_DIR` where it is an argument)."""
    try:
        if not old_dir.is_dir():
            what = "not a directory" if old_dir.exists() else "no such directory"
            raise OutputError(f"{label} {old_dir}: {what}")
    except OSError as exc:  # a path it cannot look up (a name too long)
        raise OutputError(f"{label} {old_dir}: {exc.strerror}") from None
    missing = [name for name in FILES if not (old_dir / name).is_file()]
    if missing:
        raise OutputError(
            f"{label} {old_dir}: not a render (no {', '.join(missing)}); write one with --out first"
        )
    old: dict[str, str] = {}
    for name in FILES:
        try:
            old[name] = (old_dir / name).read_text()
        except OSError as exc:
            raise OutputError(f"{label} {old_dir}: {name}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise _invalid(label, old_dir, name, "not UTF-8 text") from None
        try:
            content = parse(name, old[name])
        except (ValueError, yaml.YAMLError):
            raise _invalid(
                label, old_dir, name, "not JSON" if name.endswith(".json") else "not YAML"
            ) from None
        wrong = shapes.problem(content, SHAPES[name])
        if wrong is not None:
            raise _invalid(label, old_dir, name, wrong)
    return old


def _invalid(label: str, old_dir: Path, name: str, why: str) -> OutputError:
    return OutputError(f"{label} {old_dir}: {name}: not a valid render file ({why})")


def diff(old: dict[str, str], files: dict[str, str], old_label: str) -> str:
    """Unified diff of an earlier render (`old`, labelled `old_label`) against `files`."""
    out: list[str] = []
    for name in FILES:
        out.extend(
            difflib.unified_diff(
                old[name].splitlines(keepends=True),
                files[name].splitlines(keepends=True),
                f"{old_label}/{name}",
                f"new/{name}",
            )
        )
    return "".join(out)


def secret_changes(old: dict[str, str], files: dict[str, str]) -> list[str]:
    """Where an earlier render (`old`) and `files` both show a secret value they knew (a
    secret_digest marker) and it differs: each resource input by resource and key path, each
    output by name. Neither render holds a value, so none is shown. Markers made under
    different keys cannot be compared: then one line saying so instead."""
    old_keys, keys = (
        {m["keyid"] for n in FILES for m in MARKER.finditer(r[n])} for r in (old, files)
    )
    if old_keys and keys and old_keys != keys:
        return [
            "secrets cannot be compared, and show as changed whether or not they are: its are "
            f"digested under another key (keyid {', '.join(sorted(old_keys))}; this render's: "
            f"{', '.join(sorted(keys))}), made by another user, on another machine, or before "
            "the key file was replaced"
        ]
    before = {row["urn"]: row for row in parse("resources.json", old["resources.json"])}
    changes = [
        f"secret changed: {row['type']} {row['name']}: {where}"
        for row in parse("resources.json", files["resources.json"])
        if row["urn"] in before
        for where in _changed_markers(before[row["urn"]]["inputs"], row["inputs"], "")
    ]
    old_outputs, outputs = (parse("outputs.json", r["outputs.json"]) for r in (old, files))
    changes += [f"secret changed: output {w}" for w in _changed_markers(old_outputs, outputs, "")]
    return changes


def _changed_markers(old: Any, new: Any, where: str) -> list[str]:
    """The places, below `where`, that hold a marker in both `old` and `new`, different."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            place
            for key in sorted(old.keys() & new.keys())
            for place in _changed_markers(old[key], new[key], f"{where}.{key}" if where else key)
        ]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            place
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for place in _changed_markers(a, b, f"{where}[{i}]")
        ]
    if isinstance(old, str) and isinstance(new, str) and old != new:
        return [where] if MARKER.fullmatch(old) and MARKER.fullmatch(new) else []
    return []


def write_render(out: Path, files: dict[str, str]) -> None:
    """Write `files` into directory `out`, all or nothing: checked first, written whole into a
    temporary directory, then moved into place. For an existing `out` the temporary directory
    is made inside it, so the moves never leave its file system: any existing directory one may
    write to works, whatever its parent (read-only, another file system when `out` is a mount
    point or a symlink to a directory elsewhere). Its render files are replaced one by one and
    anything else in it is kept. A new `out` is the temporary directory, made beside it and
    renamed in one step. Raises OutputError."""
    created: list[Path] = []
    try:
        # Inside the try: `exists()` raises for a path it cannot look up (a name too long).
        if out.exists() and not out.is_dir():
            raise OutputError(f"--out {out}: exists and is not a directory")
        if out.is_symlink() and not out.exists():
            # Renaming the new directory onto a dangling link would fail, naming only the
            # temporary directory (ENOTDIR): name the missing target instead.
            raise OutputError(
                f"--out {out}: a symbolic link to {os.readlink(out)}, which is missing"
            )
        blocked = [name for name in files if (out / name).exists() and not (out / name).is_file()]
        if blocked:
            raise OutputError(f"--out {out}: {', '.join(blocked)} exists and is not a file")
        for parent in reversed([p for p in out.parents if not p.exists()]):
            parent.mkdir()
            created.append(parent)
        existing = out.is_dir()
        # mkdir, not tempfile.mkdtemp: a new `out` is this directory renamed, and should get the
        # mode any new directory gets (the umask's), not mkdtemp's 0700.
        staging = (out if existing else out.parent) / f".{out.name}.{secrets.token_hex(6)}.tmp"
        staging.mkdir()
        try:
            for name, content in files.items():
                (staging / name).write_text(content)
            if existing:
                for name in files:
                    os.replace(staging / name, out / name)
            else:
                staging.rename(out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:
        for parent in reversed(created):
            with contextlib.suppress(OSError):
                parent.rmdir()
        reason = f"{exc.strerror}: {exc.filename}" if exc.strerror else str(exc)
        raise OutputError(f"--out {out}: cannot write it ({reason})") from None
