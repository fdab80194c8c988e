"""`gpu-cluster new`: a new stack's file, Pulumi.<stack>.yaml, written from an existing stack's
config with the kind new stacks run, `workload.kind: jobset`, and the changes asked for, checked
as the program checks config before a byte is written.

A stack that leaves `workload.kind` unset runs a StatefulSet (the kind of every stack written
before JobSets, so that an upgrade never switches one); this is where "new" is known, so this is
where the JobSet default lives. Secrets are not copied: the source's ciphertext is bound to its
own stack's key (`pulumi stack init --copy-config-from` re-encrypts them, which needs the CLI).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.dates import AsOf, live
from gpu_cluster.config.loading import settings_from
from gpu_cluster.config.schema import PROJECT
from gpu_cluster.offline import goyaml
from gpu_cluster.offline.config_path import apply_override, remove_path
from gpu_cluster.offline.project import Project, ProjectError
from gpu_cluster.offline.stack_files import (
    as_engine_config,
    is_ciphertext,
    read_project_file,
    stack_file_config,
    without_ciphertext,
)

NEW_STACK_KIND = "jobset"
# A stack name as the Pulumi CLI takes one: letters, digits, `-`, `_`, `.`, at most 100
# (pulumi/pulumi sdk/v3.259.0 go/common/tokens/stack_name.go ParseStackName).
_STACK_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,100}")


@dataclass(frozen=True)
class NewStack:
    name: str
    text: str  # the stack file
    secrets: list[str]  # the source's secret keys (paths) not copied: set them again
    warnings: list[str]  # the program's warnings on the new config, and this command's


class _StackFileDumper(yaml.SafeDumper):
    """YAML the Pulumi CLI reads back as written: a string go-yaml v3 would read as something
    else (`0o17`, `1_000`: YAML 1.2 numbers that YAML 1.1 leaves as text) is quoted, and lists
    are indented below their key, as in the shipped stack files."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    plain = goyaml.resolve("", data)[0] == goyaml.STR
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=None if plain else '"')


_StackFileDumper.add_representer(str, _represent_text)


def stack_file_text(config: dict[str, Any]) -> str:
    """A stack file holding `config` (keys fully qualified, values as a stack file's are read),
    which the Pulumi CLI reads back as the same config."""
    return yaml.dump(
        {"config": config},
        Dumper=_StackFileDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )


_GONE = object()


def _without_secrets(path: str, value: Any, dropped: list[str]) -> Any:
    """`value` without its `{secure: ...}` values, each one's path added to `dropped`; _GONE
    when the whole value goes (a secret, or a list holding one: its other items would move)."""
    if is_ciphertext(value) or (isinstance(value, list) and without_ciphertext(value)[1]):
        dropped.append(path)
        return _GONE
    if isinstance(value, dict):
        kept = {k: _without_secrets(f"{path}.{k}", v, dropped) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not _GONE}
    return value


def new_stack(
    project: Project,
    name: str,
    source: str,
    sets: tuple[str, ...] = (),
    unsets: tuple[str, ...] = (),
    as_of: AsOf | None = None,
) -> NewStack:
    """Stack `name`'s file: `source`'s config with `workload.kind: jobset`, then `unsets`
    removed and `sets` made (as `pulumi config rm/set --path`), checked as the program checks
    it, as of `as_of` (None: today). ConfigError names the key for a config the program would
    refuse; ProjectError for a name that cannot be a stack's or a file that exists."""
    if project.name != PROJECT:
        raise ProjectError(
            f"project {project.name!r}: `new` writes stacks of this program's project "
            f"({PROJECT!r}); another project's program reads its own keys"
        )
    if not _STACK_NAME.fullmatch(name):
        raise ProjectError(
            f"--stack {name!r}: a stack name is 1-100 letters, digits, '-', '_' or '.'"
        )
    if (project.directory / f"Pulumi.{name}.yaml").exists():
        raise _exists(name)
    origin = stack_file_config(source, project.directory, project.name)
    config = copy.deepcopy(origin)
    apply_override(config, f"workload.kind={NEW_STACK_KIND}", project=project.name)
    for key in unsets:
        remove_path(config, key, project.name)
    for assignment in sets:
        apply_override(config, assignment, project=project.name)
    defaults = read_project_file(project.directory).defaults
    engine, secret_keys = as_engine_config({**defaults, **config}, (), project.name)
    settings, warnings = settings_from(
        engine, secret_keys, PROVIDER_SETTINGS, as_of=as_of or live()
    )
    where = (f"{PROJECT}:name", f"{PROJECT}:namespace", "kubernetes:context")
    if all(config.get(k) == origin.get(k) for k in where):
        warnings.append(
            f"Pulumi.{name}.yaml keeps {source}'s gpu-cluster:name ({settings.name!r}) and "
            f"namespace ({settings.namespace!r}): deployed where {source} is, the two stacks "
            "would make objects of the same names; give it its own with --set name=..."
        )
    dropped: list[str] = []
    written = {k: _without_secrets(k, v, dropped) for k, v in config.items()}
    runs = {"jobset": "queued JobSets", "statefulset": "a StatefulSet"}[settings.workload.kind]
    header = (
        f"# Stack {name}: written by `gpu-cluster new` from {source}; its training runs as\n"
        f"# {runs} (workload.kind).\n"
    )
    kept = {k: v for k, v in written.items() if v is not _GONE}
    return NewStack(name, header + stack_file_text(kept), dropped, warnings)


def write_new_stack(project: Project, stack: NewStack) -> Path:
    """Write the stack's file beside Pulumi.yaml; never over an existing one."""
    path = project.directory / f"Pulumi.{stack.name}.yaml"
    try:
        with path.open("x", encoding="utf-8") as out:
            out.write(stack.text)
    except FileExistsError:
        raise _exists(stack.name) from None
    return path


def _exists(name: str) -> ProjectError:
    return ProjectError(f"Pulumi.{name}.yaml exists: `new` never overwrites a stack's file")
