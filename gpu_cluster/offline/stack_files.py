"""Stack files as the Pulumi CLI reads them, and the config map the engine hands a program.

Pulumi.yaml's defaults, Pulumi.<stack>.yaml (read by stack_yaml.py with go-yaml v3's rules),
`--set` overrides as `pulumi config set --path` stores them (config_path.py), and the result as
the engine's config map (fully qualified keys, text values, structured ones as JSON), with the
secret keys; checked_config validates it and points each problem at its line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.dates import AsOf, live
from gpu_cluster.config.loading import check_namespaces, settings_from
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.config.providers import misplaced_stack_file_keys
from gpu_cluster.config.schema import PROJECT, Settings
from gpu_cluster.offline import goyaml
from gpu_cluster.offline.config_path import apply_override, changed_path, on_one_branch
from gpu_cluster.offline.stack_yaml import config_block, document, key_lines, refuse_config_value

PROJECT_DIR = Path(__file__).resolve().parents[2]  # the repository: Pulumi.yaml, __main__.py
SECRET_PLACEHOLDER = "[secret]"


def is_ciphertext(value: Any) -> bool:
    """A stack file's secret: `{secure: <ciphertext>}`."""
    return isinstance(value, dict) and set(value) == {"secure"}


def without_ciphertext(value: Any) -> tuple[Any, bool]:
    """Replace `{secure: ...}` values (anywhere in a key's value) by a placeholder.

    Secrets cannot be decrypted offline; the program sees a value of the right shape, and the
    key counts as secret, as the engine would report it."""
    if is_ciphertext(value):
        return SECRET_PLACEHOLDER, True
    if isinstance(value, dict):
        pairs = {k: without_ciphertext(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [without_ciphertext(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


class ProjectFile(NamedTuple):
    """What Pulumi.yaml says that the offline render uses."""

    name: str  # the project's name: the namespace of the program's own config keys
    # Defaults declared in its `config:` block, fully qualified: a key without a namespace is
    # filed under the project's name, as the Pulumi CLI files it.
    defaults: dict[str, Any]
    main: str | None  # `main:`, the program's directory relative to the project's


def read_project_file(project_dir: Path = PROJECT_DIR) -> ProjectFile:
    """`project_dir`'s Pulumi.yaml; ConfigError naming the file for one that cannot be used."""
    path = project_dir / "Pulumi.yaml"
    data = document(path)
    name, main = data.get("name"), data.get("main")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path.name}: `name:` must be the project's name (text)")
    if main is not None and not isinstance(main, str):
        raise ConfigError(f"{path.name}: `main:` must be a path (text)")
    defaults: dict[str, Any] = {}
    for key, decl in config_block(path, data).items():
        if isinstance(decl, dict) and "default" in decl:
            full = key if ":" in key else f"{name}:{key}"
            refuse_config_value(path, full, decl["default"])
            defaults[full] = decl["default"]
    return ProjectFile(name, defaults, main)


def stack_names(project_dir: Path) -> list[str]:
    """The stacks that have a file in `project_dir` (Pulumi.<stack>.yaml)."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))


def stack_file_config(
    stack: str, project_dir: Path = PROJECT_DIR, project: str = PROJECT
) -> dict[str, Any]:
    """Pulumi.<stack>.yaml's `config:` block, checked; `project`: the project's name (for the
    example in a message)."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = ", ".join(stack_names(project_dir))
        raise FileNotFoundError(f"no stack file {path.name}; stacks here: {known}")
    data = document(path)
    config = config_block(path, data)
    misplaced = misplaced_stack_file_keys(path.name, data)
    if misplaced:
        raise ConfigError(misplaced[0])
    for key, value in config.items():
        if ":" not in key:
            raise ConfigError(
                f"{path.name}: config key {key!r} has no namespace; "
                f"stack files spell keys namespace:key, e.g. {project}:{key}"
            )
        refuse_config_value(path, key, value)
    return dict(config)


def engine_config(
    stack: str,
    overrides: tuple[str, ...] = (),
    secret_overrides: tuple[str, ...] = (),
    project_dir: Path = PROJECT_DIR,
) -> tuple[dict[str, str], list[str]]:
    """(config map, secret keys) as the CLI would pass them for `stack` plus `--set`s
    (`secret_overrides` as `pulumi config set --secret [--path]`)."""
    config, secret_keys, _ = _engine_config(stack, overrides, secret_overrides, project_dir)
    return config, secret_keys


def _engine_config(
    stack: str,
    overrides: tuple[str, ...],
    secret_overrides: tuple[str, ...],
    project_dir: Path,
) -> tuple[dict[str, str], list[str], str]:
    """engine_config, and the project's name."""
    project = read_project_file(project_dir)
    config: dict[str, Any] = {
        **project.defaults,
        **stack_file_config(stack, project_dir, project.name),
    }
    for assignment in overrides:
        apply_override(config, assignment, project=project.name)
    engine, secret_keys = as_engine_config(config, secret_overrides, project.name)
    return engine, secret_keys, project.name


def as_engine_config(
    config: dict[str, Any], secret_overrides: tuple[str, ...] = (), project: str = PROJECT
) -> tuple[dict[str, str], list[str]]:
    """A stack file's config block (its values as read, `{secure: ...}` included) as the engine
    hands it to the program, plus `secret_overrides`: (config map, secret keys)."""
    engine: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in config.items():
        plain, secret = without_ciphertext(value)
        engine[key] = goyaml.engine_text(plain)
        if secret:
            secret_keys.append(key)
    for assignment in secret_overrides:
        key = apply_override(engine, assignment, secret=True, project=project)
        engine[key] = goyaml.engine_text(engine[key])
        secret_keys.append(key)
    return engine, sorted(set(secret_keys))


def checked_config(
    stack: str,
    overrides: tuple[str, ...] = (),
    secret_overrides: tuple[str, ...] = (),
    project_dir: Path = PROJECT_DIR,
    warn: Callable[[str], None] | None = None,
    as_of: AsOf | None = None,
) -> tuple[dict[str, str], list[str]]:
    """engine_config, validated as the program validates it (settings_from), as of `as_of`
    (None: today's). Each problem of the ConfigError that names a key written in the stack file
    starts with the file and that key's line, unless a `--set` changed the key, a key below it
    or one above it.

    A program of another project (one that composes this package's components) reads its own
    keys, under its project's name, its own way: only the namespaces are checked, and their
    warnings go to `warn` (this project's program gives its own)."""
    config, secret_keys, project = _engine_config(stack, overrides, secret_overrides, project_dir)
    try:
        if project == PROJECT:
            settings_from(config, secret_keys, PROVIDER_SETTINGS, as_of=as_of or live())
        else:
            for warning in check_namespaces(config, project):
                if warn is not None:
                    warn(warning)
    except ConfigError as exc:
        path = project_dir / f"Pulumi.{stack}.yaml"
        changed = [changed_path(a, project) for a in (*overrides, *secret_overrides)]
        lines = {
            key: line
            for key, line in key_lines(path).items()
            if not any(on_one_branch(key, c) for c in changed)
        }
        raise ConfigError(_with_lines(str(exc), path.name, lines)) from None
    return config, secret_keys


class CheckedStack(NamedTuple):
    config: dict[str, str]  # the engine's config map
    settings: Settings
    warnings: list[str]  # what `pulumi preview` would warn about


def checked_settings(stack: str, overrides: tuple[str, ...], project_dir: Path) -> CheckedStack:
    """checked_config (as of today), with the settings and warnings the program reads from it;
    raises ConfigError."""
    config, secret_keys = checked_config(stack, overrides, (), project_dir)
    settings, warnings = settings_from(config, secret_keys, PROVIDER_SETTINGS, as_of=live())
    return CheckedStack(config, settings, warnings)


# The key a problem line starts with: `gpu-cluster:rdma.nics[0].subnet ...`.
_PROBLEM_KEY = re.compile(r"^  ([^\s:]+:[^\s=:/]+)")
# The last part of a key path: `.name` or `[index]`.
_LAST_PART = re.compile(r"(\.[^.\[\]]*|\[\d+\])$")


def _with_lines(message: str, file: str, lines: dict[str, int]) -> str:
    """`message` with `file:line: ` before each problem whose key (or the nearest key above
    it) is in `lines`."""
    out = []
    for problem in message.split("\n"):
        match = _PROBLEM_KEY.match(problem)
        key = match.group(1) if match else ""
        while key and key not in lines:
            key = _LAST_PART.sub("", key) if _LAST_PART.search(key) else ""
        out.append(f"  {file}:{lines[key]}: {problem[2:]}" if key else problem)
    return "\n".join(out)
