"""Stack-file scalars that YAML 1.1 (PyYAML) and go-yaml v3 (the Pulumi CLI) read differently, and
what the program must be handed for each: the same as under the CLI, or a refusal.

Each scalar goes in one stack file three times: as a top-level key's value, inside a map and
inside a list. The expectations were measured on the Pulumi CLI v3.259.0 (`pulumi config
--json`); tests/real/test_pulumi_config.py measures them again against the offline reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Same:
    """The CLI and the offline reader hand the program these."""

    top: str  # the top-level value's text
    nested: str  # the value inside a map or a list, as JSON

    @classmethod
    def both(cls, json_text: str) -> Same:
        """A value written the same at the top level and nested (a number, an object)."""
        return cls(json_text, json_text)


@dataclass(frozen=True)
class Refused:
    """The CLI refuses the stack file; the offline reader too, its message saying this."""

    says: str


@dataclass(frozen=True)
class Rewritten:
    """The CLI hands the program `cli`, not what is written (a timestamp as Go prints a time,
    in the zone of the machine it runs on; a NaN key's value as null): the offline reader
    refuses the scalar, its message saying `says` (and to quote it)."""

    cli: Same
    says: str


Expected = Same | Refused | Rewritten


def text(top: str) -> Same:
    """A scalar both read as the text it is."""
    return Same(top, json.dumps(top))


def time(cli: str) -> Rewritten:
    return Rewritten(text(cli), "is a YAML timestamp")


NULL = Same("", "null")  # top level: "" (the CLI warns that it treats it as an empty string)
NOT_FINITE = Refused("is not a finite number; the Pulumi CLI refuses the stack file")

# (case, scalar as written, expected)
SCALARS: list[tuple[str, str, Expected]] = [
    # YAML 1.1 booleans are text in YAML 1.2
    ("yes", "yes", text("yes")),
    ("No", "No", text("No")),
    ("on", "on", text("on")),
    ("OFF", "OFF", text("OFF")),
    ("y", "y", text("y")),
    ("N", "N", text("N")),
    ("YES", "YES", text("YES")),
    ("true", "true", Same("true", "true")),
    ("False", "False", Same("false", "false")),
    ("TRUE", "TRUE", Same("true", "true")),
    ("tRUE", "tRUE", text("tRUE")),
    # integers: 0o octal, 0x, 0b, leading-0 octal, underscores, signs
    ("0o17", "0o17", Same.both("15")),
    ("-0o17", "-0o17", Same.both("-15")),
    ("0o-sign", "0o+17", Same.both("15")),
    ("017", "017", Same.both("15")),
    ("08", "08", Same.both("8")),
    ("0x1F", "0x1F", Same.both("31")),
    ("0x_1F", "0x_1F", Same.both("31")),
    ("0b101", "0b101", Same.both("5")),
    ("0b-sign", "0b-101", Same.both("-5")),
    ("1_000", "1_000", Same.both("1000")),
    ("+1", "+1", Same.both("1")),
    ("int64-max", "9223372036854775807", Same.both("9223372036854775807")),
    # above int64: uint64 at the top level, float once nested (read back as json.Number)
    ("uint64", "9223372036854775808", Same("9223372036854775808", "9223372036854776000")),
    ("beyond-uint64", "18446744073709551616", Same.both("18446744073709552000")),
    ("non-ascii-digit", "٣", Same("٣", '"\\u0663"')),
    # sexagesimal (YAML 1.1) is text
    ("1:30", "1:30", text("1:30")),
    ("1:30:00", "1:30:00", text("1:30:00")),
    # floats, written as Go's encoding/json writes them
    ("1e3", "1e3", Same.both("1000")),
    ("1.0", "1.0", Same.both("1")),
    ("1.5", "1.5", Same.both("1.5")),
    ("09.5", "09.5", Same.both("9.5")),
    (".5", ".5", Same.both("0.5")),
    ("-0.0", "-0.0", Same.both("0")),
    ("1e6", "1e6", Same.both("1000000")),
    ("1e20", "1e20", Same.both("100000000000000000000")),
    ("1e21", "1e21", Same.both("1e+21")),
    ("1e-5", "1e-5", Same.both("0.00001")),
    ("1.5e-7", "1.5e-7", Same.both("1.5e-7")),
    ("1e-400", "1e-400", Same.both("0")),
    ("1e400", "1e400", text("1e400")),  # out of range: go-yaml keeps the text
    (".5e400", ".5e400", text(".5e400")),
    # special floats: encoding/json has no Inf or NaN
    (".inf", ".inf", NOT_FINITE),
    ("-.Inf", "-.Inf", NOT_FINITE),
    ("+.INF", "+.INF", NOT_FINITE),
    (".NaN", ".NaN", NOT_FINITE),
    ("+.nan", "+.nan", text("+.nan")),
    (".Nan", ".Nan", text(".Nan")),
    # nulls
    ("tilde", "~", NULL),
    ("null", "null", NULL),
    ("Null", "Null", NULL),
    ("NULL", "NULL", NULL),
    ("empty", "", NULL),
    ("nULL", "nULL", text("nULL")),
    # timestamps: the CLI hands the program Go's text for a time
    ("date", "2026-01-01", time("2026-01-01 00:00:00 +0000 UTC")),
    ("short-date", "2026-1-2", time("2026-01-02 00:00:00 +0000 UTC")),
    ("datetime-utc", "2026-01-01T10:00:00Z", time("2026-01-01 10:00:00 +0000 UTC")),
    ("datetime-space", "2026-01-01 10:00:00.5", time("2026-01-01 10:00:00.5 +0000 UTC")),
    ("no-such-day", "2026-02-30", text("2026-02-30")),
    ("no-such-month", "2026-13-01", text("2026-13-01")),
    ("datetime-without-zone", "2026-01-01T10:00:00", text("2026-01-01T10:00:00")),
    # YAML 1.1's value and merge keys as values
    ("equals", "=", text("=")),
    ("merge-as-value", "<<", text("<<")),
    # explicit tags
    ("tag-float", "!!float 1", Same.both("1")),
    ("tag-int-quoted", '!!int "0o17"', Same.both("15")),
    ("tag-str", "!!str 1e3", text("1e3")),
    ("tag-non-specific-plain", "! 1e3", Same.both("1000")),
    ("tag-non-specific-quoted", '! "1e3"', text("1e3")),
    ("tag-unknown", "!local yes", text("yes")),
    ("tag-bool-mismatch", "!!bool yes", Refused("cannot decode !!str `yes` as a !!bool")),
    # mapping keys that are not text: the CLI prints them with Go's %v
    ("key-int", "{1: v}", Same.both('{"1":"v"}')),
    ("key-yes", "{yes: v}", Same.both('{"yes":"v"}')),
    ("key-null", "{~: v}", Rewritten(Same.both('{"<nil>":"v"}'), "the key ~ is null")),
    ("key-float", "{1.5: v, 1e6: w, 2.0: x}", Same.both('{"1.5":"v","1e+06":"w","2":"x"}')),
    ("key-inf", "{.inf: v}", Same.both('{"+Inf":"v"}')),
    ("key-nan", "{.nan: v}", Rewritten(Same.both('{"NaN":null}'), "the key .nan is NaN")),
    (
        "key-date",
        "{2026-01-01: v}",
        Rewritten(Same.both('{"2026-01-01 00:00:00 +0000 UTC":"v"}'), "the key 2026-01-01 is"),
    ),
    (
        "key-quoted-merge",
        "{'<<': {a: 1}, b: 2}",
        Rewritten(Same.both('{"a":1,"b":2}'), "the key '<<' is text here"),
    ),
    ("key-merged-int", "{<<: {1: a}, b: 2}", Same.both('{"1":"a","b":2}')),
]

# (case, scalar) of those both read, the same: what a stack file can hold and hand a program.
READ_AS_WRITTEN = [(case, s) for case, s, expected in SCALARS if isinstance(expected, Same)]


def stack_file(scalar: str) -> str:
    """A stack file with `scalar` as a top-level value, inside a map and inside a list."""
    return (
        "config:\n"
        "  gpu-cluster:top: " + scalar + "\n"
        "  gpu-cluster:inMap:\n"
        "    k: " + scalar + "\n"
        "  gpu-cluster:inList:\n"
        "    - " + scalar + "\n"
    )


def parsed(json_text: str) -> Any:
    """JSON with each number kept as its text (so `1` and `1.0` differ, as they do to the
    program) and objects compared whatever their key order."""
    return json.loads(
        json_text, parse_float=lambda t: ("number", t), parse_int=lambda t: ("number", t)
    )


def values(config: dict[str, str]) -> dict[str, Any]:
    """The three keys of stack_file() as the program reads them: the top-level text as it is
    unless it is an object (JSON), the nested values parsed."""
    top = config["gpu-cluster:top"]
    return {
        "top": parsed(top) if top[:1] in ("{", "[") else top,
        "inMap": parsed(config["gpu-cluster:inMap"]),
        "inList": parsed(config["gpu-cluster:inList"]),
    }


def expected_values(expected: Same) -> dict[str, Any]:
    top = expected.top
    return {
        "top": parsed(top) if top[:1] in ("{", "[") else top,
        "inMap": {"k": parsed(expected.nested)},
        "inList": [parsed(expected.nested)],
    }


# `--set a.b=VALUE` (as `pulumi config set --path a.b VALUE`): (case, VALUE, what is stored).
# Only "true"/"false" and base-10 integers (signed, no leading 0) become other than text.
SET_VALUES: list[tuple[str, str, Any]] = [
    ("yes", "yes", "yes"),
    ("1e3", "1e3", "1e3"),
    ("plus-sign", "+5", 5),
    ("minus-leading-zero", "-05", -5),
    ("leading-zero", "05", "05"),
    ("zero", "0", 0),
    ("minus-zero", "-0", 0),
    ("underscores", "1_000", "1_000"),
    ("hex", "0x1F", "0x1F"),
    ("true", "true", True),
    ("True", "True", "True"),
    ("empty", "", ""),
    ("float", "1.5", "1.5"),
    ("tilde", "~", "~"),
    ("null", "null", "null"),
    ("non-ascii-digit", "٣", "٣"),
    ("int64-min-plus-one", "-9007199254740991", -9007199254740991),
]
