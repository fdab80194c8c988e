"""A Pulumi project or stack file's YAML read as the Pulumi CLI reads it: go-yaml v3's rules
(goyaml.py) rather than PyYAML's YAML 1.1 ones, its limits (nesting, alias expansion), the shapes
config may hold, and where each key is written (for messages).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpu_cluster.config.loading import MAX_DEPTH, TOO_DEEP
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.offline import goyaml
from gpu_cluster.offline.yaml_aliases import excessive_aliasing

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
    (yaml_aliases.excessive_aliasing)."""

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
        refused = excessive_aliasing(node)
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


def refuse_config_value(file: Path, key: str, value: Any) -> None:
    found = _config_value_problem(value, key)
    if found:
        problem, line = found
        raise ConfigError(f"{file.name}{'' if line is None else f':{line}'}: {problem}")


def _load_yaml(path: Path) -> Any:
    """One YAML document; ConfigError naming the file (and line) when it cannot be read.

    A copy of the parse cached by the file's content: the command and the tests read the same
    few stack files again and again, and the pure-Python loader (above) is the costly part;
    callers edit what they get (overrides are applied in place)."""
    try:
        text = path.read_text()
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8
        raise ConfigError(f"{path.name}: cannot read it: {exc}") from None
    return copy.deepcopy(_parsed(path.name, text))


@functools.lru_cache(maxsize=64)
def _parsed(name: str, text: str) -> Any:
    """The document `text` of the file `name`, as _load_yaml describes (never to be edited)."""
    try:
        return yaml.load(text, Loader=_StackFileLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}" if mark else name
        raise ConfigError(f"{where}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: e.g. a 5000-digit int
        raise ConfigError(f"{name}: cannot read it: {exc}") from None


def document(path: Path) -> dict[Any, Any]:
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


def config_block(path: Path, data: dict[Any, Any]) -> dict[str, Any]:
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


def key_lines(path: Path) -> dict[str, int]:
    """The line each config key path is first written on in a stack file that reads
    (`gpu-cluster:pod.cpuRequest` -> 7); keys that come from a merge or an alias have none."""
    return dict(_key_lines(path.read_text()))


@functools.lru_cache(maxsize=64)
def _key_lines(text: str) -> dict[str, int]:
    """key_lines of a stack file's `text`, cached by content as _load_yaml is (never edited)."""
    root = yaml.compose(text, Loader=_StackFileLoader)
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
