"""go-yaml v3's refusal of a document whose aliases expand too far (a "billion laughs"), counted
on the node graph PyYAML composes, so that a stack file the Pulumi CLI refuses costs no more to
refuse here (stack_yaml's loader runs it before constructing a document)."""

from __future__ import annotations

from typing import NamedTuple

import yaml

# The tag of a `<<` merge key: what it merges in is not decoded through an alias.
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _alias_ratio(decoded: int) -> float:
    """gopkg.in/yaml.v3 decode.go allowedAliasRatio: the share of decoded nodes that may come
    from alias expansion, 99% up to 400,000 decodes, falling to 10% at 4,000,000."""
    low, high = 400_000, 4_000_000
    if decoded <= low:
        return 0.99
    if decoded >= high:
        return 0.10
    return 0.99 - 0.89 * (decoded - low) / (high - low)


def excessive_aliasing(root: yaml.Node) -> tuple[str, yaml.Mark] | None:
    """Where go-yaml stops decoding a document whose aliases expand too far (a "billion
    laughs"), as its decoder counts (decode.go unmarshal: more than 1000 nodes decoded, more
    than 100 of them through aliases, and their share above _alias_ratio), merge keys aside:
    the config key being decoded and its mark, or None. Walked without recursion, and only as
    far as go-yaml would go, so a bomb costs no more than the limit. An alias inside what it
    names is not followed: stack_yaml refuses that loop by name (_config_value_problem)."""
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
                if key_node.tag != _MERGE_TAG:
                    stack.append(_Decoding(key_node, inside, named, False, around))
    return None


class _Decoding(NamedTuple):
    """A node excessive_aliasing is to count."""

    node: yaml.Node
    inside: bool  # reached through an alias
    key: tuple[str, yaml.Mark] | None  # the config key it is under, and where that is written
    is_config: bool  # the `config:` mapping itself
    around: tuple[int, ...]  # the nodes being decoded around it
