"""Stack files as the Pulumi CLI reads them, and the config map the engine hands a program.

Pulumi.yaml's defaults, Pulumi.<stack>.yaml read with go-yaml v3's rules (goyaml.py), `--set`
overrides as `pulumi config set --path` stores them, and the result as the engine's config map
(fully qualified keys, text values, structured ones as JSON), with the secret keys.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.dates import AsOf, live
from gpu_cluster.config.loading import (
    MAX_DEPTH,
    MAX_EXACT_INT,
    TOO_DEEP,
    check_namespaces,
    nesting_depth,
    number_problems,
    parse_json,
    settings_from,
)
from gpu_cluster.config.messages import ConfigError, clipped
from gpu_cluster.config.providers import misplaced_stack_file_keys
from gpu_cluster.config.schema import PROJECT
from gpu_cluster.offline import goyaml

PROJECT_DIR = Path(__file__).resolve().parents[2]  # the repository: Pulumi.yaml, __main__.py
SECRET_PLACEHOLDER = "[secret]"
# libyaml's parser when PyYAML has it: the same documents, several times faster.
YamlLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"


class _TooDeep(yaml.scanner.ScannerError):
    """Nesting deeper than MAX_DEPTH, met by the scanner."""


@dataclass(frozen=True)
class _Refused:
    """A scalar the offline reader does not pass on: where it is and why (the key path is
    added where the value is found in the config)."""

    line: int
    problem: str


class _StackFileLoader(yaml.SafeLoader):
    """Reads a stack (or project) file as the Pulumi CLI does, with go-yaml v3's rules rather
    than PyYAML's YAML 1.1 ones: plain scalars resolve as `goyaml.resolve` says (`yes`, `on`,
    `1:30` are text; `0o17`, `1e3` numbers), explicit tags are checked as go-yaml checks them,
    and a mapping key that is not text becomes the text the CLI makes of it (`1` is "1").

    What the program cannot take as the CLI hands it becomes a `_Refused` value: a non-finite
    number (the CLI refuses the whole stack file: encoding/json has no Inf or NaN) and a
    timestamp (the CLI rewrites `2026-01-01` as Go prints a time,
    `2026-01-01 00:00:00 +0000 UTC`, in the zone of the machine it runs on).

    A key written twice in one mapping is refused where PyYAML would silently keep the last
    value (go-yaml v3 refuses it: decode.go, "mapping key %#v already defined at line %d",
    gopkg.in/yaml.v3 v3.0.1).

    A tag go-yaml does not resolve (`!foo`, `!!set`) leaves the node as if untagged: a scalar
    is its text, a sequence a list, a mapping a mapping (resolve.go resolvableTag). `!!binary`
    stays bytes, which config refuses (go-yaml would decode it into text, not always UTF-8).

    PyYAML's own parser, not libyaml's: its composer is where a quoted scalar's non-specific
    `!` tag can still be seen (go-yaml makes such a scalar text; PyYAML would resolve it).

    Two limits keep any file an answer: nesting deeper than MAX_DEPTH is refused as the
    scanner meets it, naming the config key it is under (go-yaml stops at 10,000 levels:
    scannerc.go max_flow_level and max_indents; PyYAML would take minutes to scan that far,
    then compose recursively), and so is a document whose aliases expand as go-yaml refuses
    (_excessive_aliasing)."""

    # None of YAML 1.1's implicit resolvers: resolve() below decides every plain scalar.
    yaml_implicit_resolvers = {}  # noqa: RUF012 (PyYAML reads it from the class)
    # What compose_node is composing: the key (or index) of each node open around it.
    _path: list[Any]

    def fetch_more_tokens(self) -> None:
        super().fetch_more_tokens()
        # PyYAML's scanner revisits every open flow level on each token: thousands of levels
        # take minutes to read. Block nesting counts too (an indent per level).
        if self.flow_level + len(self.indents) > MAX_DEPTH:
            raise _TooDeep(problem=TOO_DEEP, problem_mark=self.get_mark())

    def compose_node(self, parent: Any, index: Any) -> yaml.Node:
        if parent is None:
            self._path = []
        self._path.append(index)
        try:
            node = super().compose_node(parent, index)
        except _TooDeep as exc:
            # Raised where the scanner is; named here, at the config key whose value it is in.
            if len(self._path) == 3 and getattr(self._path[1], "value", None) == "config":
                exc.problem = f"{getattr(index, 'value', index)}: {exc.problem}"
            raise
        finally:
            self._path.pop()
        assert node is not None  # PyYAML composes a node whenever it calls compose_node
        return node

    def construct_document(self, node: yaml.Node) -> Any:
        refused = _excessive_aliasing(node)
        if refused is not None:
            key, mark = refused
            raise yaml.constructor.ConstructorError(
                problem=f"{key + ': ' if key else ''}its YAML aliases expand to more than the "
                "Pulumi CLI reads (go-yaml: document contains excessive aliasing)",
                problem_mark=mark,
            )
        return super().construct_document(node)

    def resolve(self, kind: Any, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode:
            if not implicit[0]:
                return _TAG + "str"  # quoted, or a block scalar
            # go-yaml's parser tags a plain `<<` !!merge itself (decode.go parser.scalar).
            return _TAG + ("merge" if value == "<<" else goyaml.resolve("", value)[0][2:])
        return _TAG + ("seq" if kind is yaml.SequenceNode else "map")

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if event.tag == "!" and event.style:
            # A quoted (or block) scalar tagged `!` is text to go-yaml (decode.go parser.node);
            # PyYAML would resolve it as a plain one. A plain `! 1` resolves alike in both.
            event.tag = _TAG + "str"
        node: yaml.ScalarNode = super().compose_scalar_node(anchor)
        return node

    def construct_go_scalar(self, node: yaml.ScalarNode) -> Any:
        text: str = self.construct_scalar(node)
        try:
            tag, value = goyaml.resolve("!!" + node.tag[len(_TAG) :], text)
        except goyaml.GoYamlError as exc:
            raise yaml.constructor.ConstructorError(
                problem=str(exc), problem_mark=node.start_mark
            ) from None
        line = node.start_mark.line + 1
        if tag == goyaml.TIMESTAMP:
            return _Refused(
                line,
                f"{text} is a YAML timestamp, which the Pulumi CLI hands the program as Go "
                "prints a time (2026-01-01 becomes 2026-01-01 00:00:00 +0000 UTC); quote it",
            )
        if isinstance(value, float) and not math.isfinite(value):
            go = "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
            return _Refused(
                line,
                f"{text} is not a finite number; the Pulumi CLI refuses the stack file "
                f"(json: unsupported value: {go})",
            )
        return value

    def construct_other_tag(self, node: yaml.Node) -> Any:
        kind = {yaml.ScalarNode: "str", yaml.SequenceNode: "seq"}.get(type(node), "map")
        return self.yaml_constructors[_TAG + kind](self, node)

    def _text_key(self, node: yaml.Node) -> yaml.Node:
        """A scalar key as the CLI reads it: one that is not text becomes the text the CLI
        makes of it (goyaml.key_text: `1` is "1", `true` "true", `1e6` "1e+06"). Refuses a
        timestamp, null or NaN key, and a quoted '<<' (text to go-yaml, but the CLI writes it
        back out plain and reads it again: a merge key)."""
        if not isinstance(node, yaml.ScalarNode) or node.tag == _TAG + "merge":
            return node
        if node.tag == _TAG + "str":
            if node.value == "<<":
                raise yaml.constructor.ConstructorError(
                    problem="the key '<<' is text here, but the Pulumi CLI reads it back as a "
                    "merge key; write << plain to merge, or rename the key",
                    problem_mark=node.start_mark,
                )
            return node
        value = self.construct_object(node)
        if not isinstance(value, (bool, int, float, type(None), _Refused)):
            return node  # e.g. !!binary: left to the checks on config values
        tag, value = goyaml.resolve("!!" + node.tag[len(_TAG) :], node.value)
        text = goyaml.key_text(tag, value)
        if text is None:
            why = {
                goyaml.TIMESTAMP: "a YAML timestamp, which the Pulumi CLI turns into Go's text "
                "for a time",
                goyaml.NULL: 'null, which the Pulumi CLI turns into "<nil>" (or drops)',
            }.get(tag, "NaN, whose value the Pulumi CLI loses (it comes out null)")
            raise yaml.constructor.ConstructorError(
                problem=f"the key {node.value or '(empty)'} is {why}; quote it",
                problem_mark=node.start_mark,
            )
        return yaml.ScalarNode(_TAG + "str", text, node.start_mark, node.end_mark)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Keys as text before merging; the mappings merged in come through here first.
        node.value = [(self._text_key(k), v) for k, v in node.value]
        super().flatten_mapping(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        node.value = [(self._text_key(k), v) for k, v in node.value]
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = (
                "<<"
                if key_node.tag == _TAG + "merge"
                else self.construct_object(key_node, deep=True)
            )
            line = key_node.start_mark.line + 1
            with contextlib.suppress(TypeError):  # an unhashable key: the base class says so
                if key in first_line:
                    raise yaml.constructor.ConstructorError(
                        problem=f"{key} is written twice (first on line {first_line[key]}); "
                        "keep one",
                        problem_mark=key_node.start_mark,
                    )
                first_line[key] = line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)
        return mapping


for _tag in ("bool", "int", "float", "null", "timestamp", "merge"):
    _StackFileLoader.add_constructor(_TAG + _tag, _StackFileLoader.construct_go_scalar)
for _tag in ("set", "omap", "pairs"):
    _StackFileLoader.add_constructor(_TAG + _tag, _StackFileLoader.construct_other_tag)
_StackFileLoader.add_constructor(None, _StackFileLoader.construct_other_tag)


def _alias_ratio(decoded: int) -> float:
    """gopkg.in/yaml.v3 decode.go allowedAliasRatio: the share of decoded nodes that may come
    from alias expansion, 99% up to 400,000 decodes, falling to 10% at 4,000,000."""
    low, high = 400_000, 4_000_000
    if decoded <= low:
        return 0.99
    if decoded >= high:
        return 0.10
    return 0.99 - 0.89 * (decoded - low) / (high - low)


def _excessive_aliasing(root: yaml.Node) -> tuple[str, yaml.Mark] | None:
    """Where go-yaml stops decoding a document whose aliases expand too far (a "billion
    laughs"), as its decoder counts (decode.go unmarshal: more than 1000 nodes decoded, more
    than 100 of them through aliases, and their share above _alias_ratio), merge keys aside:
    the config key being decoded and its mark, or None. Walked without recursion, and only as
    far as go-yaml would go, so a bomb costs no more than the limit. An alias inside what it
    names is not followed: _config_value_problem refuses that loop by name."""
    decoded, aliased = 1, 0  # the document node
    seen: set[int] = set()
    stack = [_Decoding(root, False, None, False, ())]
    while stack:
        node, inside, key, is_config, around = stack.pop()
        if id(node) in around:
            continue
        if id(node) in seen and not inside:
            decoded += 1  # the alias node itself; what it names is decoded again below
            inside = True
        seen.add(id(node))
        decoded += 1
        aliased += inside
        if aliased > 100 and decoded > 1000 and aliased / decoded > _alias_ratio(decoded):
            return key or ("", node.start_mark)
        around = (*around, id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(_Decoding(n, inside, key, False, around) for n in reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key_node, value in reversed(node.value):
                named = key
                if is_config and isinstance(key_node, yaml.ScalarNode):
                    named = (key_node.value, key_node.start_mark)
                config = node is root and getattr(key_node, "value", None) == "config"
                stack.append(_Decoding(value, inside, named, config, around))
                if key_node.tag != _TAG + "merge":
                    stack.append(_Decoding(key_node, inside, named, False, around))
    return None


class _Decoding(NamedTuple):
    """A node _excessive_aliasing is to count."""

    node: yaml.Node
    inside: bool  # reached through an alias
    key: tuple[str, yaml.Mark] | None  # the config key it is under, and where that is written
    is_config: bool  # the `config:` mapping itself
    around: tuple[int, ...]  # the nodes being decoded around it


_CONFIG_TYPES = (str, int, float, bool, type(None), list, dict)


def _config_value_problem(
    value: Any, path: str, inside: tuple[int, ...] = ()
) -> tuple[str, int | None] | None:
    """Why a stack-file value cannot be config, and the line when known (None when it can):
    config holds text, numbers, booleans, lists and mappings, no value may contain itself (a
    YAML alias loop) or nest deeper than MAX_DEPTH (aliases can stack shallow collections), and
    no scalar may be one the loader refused (_Refused)."""
    if isinstance(value, _Refused):
        return f"{path}: {value.problem}", value.line
    if id(value) in inside:
        return f"{path} contains itself (a YAML alias loop)", None
    if len(inside) >= MAX_DEPTH and isinstance(value, (list, dict)):
        return f"{path}: {TOO_DEEP}", None
    if not isinstance(value, _CONFIG_TYPES):
        return (
            f"{path} is a {type(value).__name__}; config holds text, numbers, lists and mappings",
            None,
        )
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        if isinstance(value, dict) and not isinstance(key, str):
            return f"{path} has a key of type {type(key).__name__}; keys are text", None
        child = f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]"
        problem = _config_value_problem(item, child, (*inside, id(value)))
        if problem:
            return problem
    return None


def _refuse_config_value(file: Path, key: str, value: Any) -> None:
    found = _config_value_problem(value, key)
    if found:
        problem, line = found
        raise ConfigError(f"{file.name}{'' if line is None else f':{line}'}: {problem}")


def _load_yaml(path: Path) -> Any:
    """One YAML document; ConfigError naming the file (and line) when it cannot be read."""
    try:
        return yaml.load(path.read_text(), Loader=_StackFileLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path.name}:{mark.line + 1}" if mark else path.name
        raise ConfigError(f"{where}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, OSError, ValueError) as exc:  # ValueError: e.g. a 5000-digit int
        raise ConfigError(f"{path.name}: cannot read it: {exc}") from None


def _document(path: Path) -> dict[Any, Any]:
    """A project or stack file's top-level mapping ({} for an empty file)."""
    data = _load_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path.name}: must be a YAML mapping (with a `config:` key), not a "
            f"{type(data).__name__}"
        )
    return data


def _config_block(path: Path, data: dict[Any, Any]) -> dict[str, Any]:
    """The `config:` mapping of `path`'s document `data`, checked for shape."""
    config = data.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        match = re.search(r"^config\s*:", path.read_text(), re.MULTILINE)
        line = f":{path.read_text()[: match.start()].count(chr(10)) + 1}" if match else ""
        raise ConfigError(
            f"{path.name}{line}: `config:` must be a mapping of keys to values, not a "
            f"{type(config).__name__}"
        )
    for key in config:
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{path.name}: config key {key!r} is not a name")
    return config


def _without_ciphertext(value: Any) -> tuple[Any, bool]:
    """Replace `{secure: ...}` values (anywhere in a key's value) by a placeholder.

    Secrets cannot be decrypted offline; the program sees a value of the right shape, and the
    key counts as secret, as the engine would report it."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER, True
        pairs = {k: _without_ciphertext(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_without_ciphertext(v) for v in value]
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
    data = _document(path)
    name, main = data.get("name"), data.get("main")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path.name}: `name:` must be the project's name (text)")
    if main is not None and not isinstance(main, str):
        raise ConfigError(f"{path.name}: `main:` must be a path (text)")
    defaults: dict[str, Any] = {}
    for key, decl in _config_block(path, data).items():
        if isinstance(decl, dict) and "default" in decl:
            full = key if ":" in key else f"{name}:{key}"
            _refuse_config_value(path, full, decl["default"])
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
    data = _document(path)
    config = _config_block(path, data)
    misplaced = misplaced_stack_file_keys(path.name, data)
    if misplaced:
        raise ConfigError(misplaced[0])
    for key, value in config.items():
        if ":" not in key:
            raise ConfigError(
                f"{path.name}: config key {key!r} has no namespace; "
                f"stack files spell keys namespace:key, e.g. {project}:{key}"
            )
        _refuse_config_value(path, key, value)
    return dict(config)


# What `config set --path` would read as an integer if it fit in 64 bits.
_DECIMAL_INT = re.compile(r"[-+]?[1-9][0-9]*|-0[0-9]*")
_PATH_PART = re.compile(r"([^.\[\]:]+)|\[(\d+)\]")
# `key`, `key.sub`, `key[0]`, `key.list[2].sub`: every part named, no empty parts.
_PATH = re.compile(r"[^.\[\]:]+(\.[^.\[\]:]+|\[\d+\])*")


def _override_error(key: str, problem: str) -> ConfigError:
    return ConfigError(f"invalid stack config:\n  --set {clipped(key)}: {problem}")


def _assignment(assignment: str, project: str) -> tuple[str, str, list[str | int], str]:
    """`key=value` taken apart: the key as written, the fully qualified top-level key (a key
    without a namespace is the project's, as `pulumi config set` takes it), the path's parts
    (the top-level key's name first) and the value. ConfigError for a path that is none (never
    echoing the value, which may be secret)."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        # The argument is not echoed: with --set-secret it may be the secret itself.
        raise ConfigError("invalid stack config:\n  --set takes KEY=VALUE: an argument has no key")
    namespace, colon, path = key.partition(":")
    if not colon:
        namespace, path = project, key
    if not namespace or not _PATH.fullmatch(path):
        raise _override_error(
            key, "not a config path (write key, key.sub or key[0]; no empty parts)"
        )
    parts: list[str | int] = [
        m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _PATH_PART.finditer(path)
    ]
    return key, f"{namespace}:{parts[0]}", parts, raw


def apply_override(
    config: dict[str, Any], assignment: str, secret: bool = False, project: str = PROJECT
) -> str:
    """`key=value` as `pulumi config set [--secret] [--path] key value` would store it; returns
    the fully qualified top-level key it changed. Raises ConfigError naming the key for a path
    that does not fit the config's shape (never echoing the value, which may be secret)."""
    key, top, parts, raw = _assignment(assignment, project)
    if len(parts) == 1:
        config[top] = raw  # top-level values are always strings
        return top
    if len(parts) - 1 > MAX_DEPTH:
        raise _override_error(key, TOO_DEEP)
    # Nested values: "true"/"false" become booleans and base-10 integers numbers, the rest
    # stays text (`yes`, `1e3`, `05`, `0x1F`: goyaml.coerce_path_value). A secret stays text
    # (config/value.go coerceObject leaves a secure value alone).
    value = raw if secret else goyaml.coerce_path_value(raw)
    # One difference, a refusal: an integer beyond 2^53 - 1 is refused here, also one beyond
    # 64 bits, which the CLI would keep as text (the program could not take it as a number).
    if not secret and (
        (isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INT)
        or (isinstance(value, str) and _DECIMAL_INT.fullmatch(value))
    ):
        raise _override_error(key, "number too large (at most 2^53 - 1)")
    node = config.get(top)
    if isinstance(node, str):
        if nesting_depth(node) > MAX_DEPTH:
            raise _override_error(key, f"{top} is {TOO_DEEP}")
        try:
            node = parse_json(node)
        except ValueError:
            raise _override_error(key, f"{top} holds a plain value, not an object") from None
        if number_problems(node, top):
            raise _override_error(
                key,
                f"{top} holds a number beyond 2^53 - 1 or not finite, which the engine "
                "cannot carry",
            )
    root = node if node is not None else ({} if isinstance(parts[1], str) else [])
    config[top] = root
    cursor: Any = root
    for depth, part in enumerate(parts[1:], 1):
        problem = _step_problem(cursor, part)
        if problem:
            raise _override_error(key, f"{_path_text(parts[:depth])} {problem}")
        # Pulumi pads a list with nulls up to the index (properties_path.go, Add); no element
        # here may be null, so only the next free index is taken.
        if isinstance(part, int) and part == len(cursor):
            cursor.append(None)
        if depth == len(parts) - 1:
            cursor[part] = value
            break
        if (cursor[part] if isinstance(part, int) else cursor.get(part)) is None:
            cursor[part] = {} if isinstance(parts[depth + 1], str) else []
        cursor = cursor[part]
    return top


def _step_problem(node: Any, part: str | int) -> str | None:
    """Why `part` cannot index `node` (None when it can; a list grows by one at its end)."""
    if isinstance(node, list):
        if isinstance(part, str):
            return f"is a list: it takes an index [N], not .{part}"
        if part > len(node):
            return f"has {len(node)} items: index [{part}] is out of range"
        return None
    if isinstance(node, dict):
        return f"is an object: it takes .key, not [{part}]" if isinstance(part, int) else None
    return "is a plain value: nothing is below it"


def _path_text(parts: list[str | int]) -> str:
    text = str(parts[0])
    for part in parts[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


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
    engine: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in config.items():
        plain, secret = _without_ciphertext(value)
        engine[key] = goyaml.engine_text(plain)
        if secret:
            secret_keys.append(key)
    for assignment in secret_overrides:
        key = apply_override(engine, assignment, secret=True, project=project.name)
        engine[key] = goyaml.engine_text(engine[key])
        secret_keys.append(key)
    return engine, sorted(set(secret_keys)), project.name


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
        changed = [_changed_path(a, project) for a in (*overrides, *secret_overrides)]
        lines = {
            key: line
            for key, line in _key_lines(path).items()
            if not any(_on_one_branch(key, c) for c in changed)
        }
        raise ConfigError(_with_lines(str(exc), path.name, lines)) from None
    return config, secret_keys


def _changed_path(assignment: str, project: str) -> str:
    """The key path a `--set` assignment changes, fully qualified."""
    _, top, parts, _ = _assignment(assignment, project)
    return top + _path_text(parts)[len(str(parts[0])) :]


def _on_one_branch(a: str, b: str) -> bool:
    """Whether key paths `a` and `b` are one, or one lies below the other."""
    short, long = sorted((a, b), key=len)
    return long == short or long.startswith((short + ".", short + "["))


def _key_lines(path: Path) -> dict[str, int]:
    """The line each config key path is first written on in a stack file that reads
    (`gpu-cluster:pod.cpuRequest` -> 7); keys that come from a merge or an alias have none."""
    root = yaml.compose(path.read_text(), Loader=_StackFileLoader)
    if not isinstance(root, yaml.MappingNode):
        return {}
    config = next((v for k, v in root.value if getattr(k, "value", None) == "config"), None)
    lines: dict[str, int] = {}
    seen: set[int] = set()
    stack: list[tuple[str, yaml.Node, int]] = [
        (k.value, v, k.start_mark.line + 1)
        for k, v in getattr(config, "value", [])
        if isinstance(k, yaml.ScalarNode)
    ]
    while stack:
        key, node, line = stack.pop()
        lines.setdefault(key, line)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(
                (f"{key}.{k.value}", v, k.start_mark.line + 1)
                for k, v in node.value
                if isinstance(k, yaml.ScalarNode) and k.tag != _TAG + "merge"
            )
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(
                (f"{key}[{i}]", item, item.start_mark.line + 1) for i, item in enumerate(node.value)
            )
    return lines


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
