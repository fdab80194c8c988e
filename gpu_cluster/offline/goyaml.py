"""Stack-file scalars as the Pulumi CLI reads them, and config values as it formats them.

The CLI (v3.259.0) reads `Pulumi.<stack>.yaml` with gopkg.in/yaml.v3 v3.0.1 (the version
pulumi/pulumi pkg/go.mod v3.259.0 selects): YAML 1.2-like rules, not PyYAML's YAML 1.1 ones.
`resolve` is go-yaml's `resolve()` (gopkg.in/yaml.v3@v3.0.1 resolve.go) written out in Python,
down to the Go standard library calls it makes (strconv.ParseInt/ParseUint/ParseFloat,
time.Parse, as in Go 1.26, the toolchain the real tier builds the CLI with).

The CLI then decodes the stack file into `any`, writes it back out as YAML and decodes that into
config values (sdk/go/common/workspace/loaders.go LoadProjectStackBytes), and hands a program
each value as text: strings as they are, anything else as Go's encoding/json writes it
(sdk/go/common/resource/config/object.go MarshalString, value.go; github.com/pulumi/pulumi
sdk/v3@v3.259.0). `engine_text` writes values that way.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

STR, BOOL, INT, FLOAT, NULL, TIMESTAMP, MERGE = (
    "!!str",
    "!!bool",
    "!!int",
    "!!float",
    "!!null",
    "!!timestamp",
    "!!merge",
)
# Tags resolve() works out from the text; any other tag (!!binary, !!set, !foo) it leaves alone.
_RESOLVABLE = ("", STR, BOOL, INT, FLOAT, NULL, TIMESTAMP)

# resolve.go init(): the words it knows. Anything else that starts with one of "yYnNtTfFoO~" is
# text: `yes`, `No`, `on`, `OFF`, `y`, `n` are strings (YAML 1.1 made them booleans).
_WORDS: dict[str, tuple[str, Any]] = {
    **{w: (BOOL, True) for w in ("true", "True", "TRUE")},
    **{w: (BOOL, False) for w in ("false", "False", "FALSE")},
    **{w: (NULL, None) for w in ("", "~", "null", "Null", "NULL")},
    **{w: (FLOAT, math.nan) for w in (".nan", ".NaN", ".NAN")},
    **{w: (FLOAT, math.inf) for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: (FLOAT, -math.inf) for w in ("-.inf", "-.Inf", "-.INF")},
    "<<": (MERGE, "<<"),
}
# resolve.go resolveTable: the first byte decides what a plain scalar may be ('S'ign, 'D'igit,
# 'M'ap word, '.' float); any other first character (a letter, a non-ASCII digit) makes text.
_HINTS = {"+": "S", "-": "S", ".": ".", **dict.fromkeys("0123456789", "D")}
_HINTS.update(dict.fromkeys("yYnNtTfFoO~", "M"))
# resolve.go yamlStyleFloat
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# What strconv.ParseFloat accepts of a scalar that starts with "." (atof.go readFloat: digits,
# underscores only between digits (atoi.go underscoreOK), an optional exponent).
_DOT_FLOAT = re.compile(r"\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?")
# resolve.go allowedTimestampFormats, as time.Parse reads them: "2006-1-2T15:4:5.999999999Z07:00"
# (also with a lower-case t), "2006-1-2 15:4:5.999999999" (a layout space takes one or more
# spaces: time/format.go skip) and "2006-1-2". Months, days, hours, minutes and seconds take one
# or two digits (getnum); the fraction any number of digits after "." or ",".
_TIMESTAMP = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{1,2})-(?P<d>[0-9]{1,2})"
    r"(?:(?:[Tt](?P<hms>[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2})(?:[.,][0-9]+)?"
    r"(?:Z|[-+](?P<zh>[0-9]{2}):(?P<zm>[0-9]{2})))"
    r"|(?: +(?P<hms2>[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2})(?:[.,][0-9]+)?))?"
)
_DIGITS = {c: i for i, c in enumerate("0123456789abcdefghijklmnopqrstuvwxyz")}
_DIGITS.update({c.upper(): i for c, i in _DIGITS.items() if c.isalpha()})


class GoYamlError(ValueError):
    """What go-yaml refuses to decode (an explicit tag that does not fit the text)."""


def _parse_uint(text: str, base: int) -> int | None:
    """strconv.ParseUint(text, base, 64), or None where it returns an error. Base 0 reads the
    0b/0o/0x prefixes and a leading 0 as octal; underscores are not handled (resolve() strips
    them before it calls this)."""
    if not text:
        return None
    if base == 0:
        base = 10
        if text[0] == "0":
            prefix = text[1:2].lower()
            if len(text) >= 3 and prefix in ("b", "o", "x"):
                base, text = {"b": 2, "o": 8, "x": 16}[prefix], text[2:]
            else:
                base, text = 8, text[1:]
    number = 0
    for char in text:
        digit = _DIGITS.get(char)
        if digit is None or digit >= base:
            return None
        number = number * base + digit
        if number >= 1 << 64:
            return None
    return number


def _parse_int(text: str, base: int) -> int | None:
    """strconv.ParseInt(text, base, 64), or None where it returns an error."""
    sign, rest = (text[0], text[1:]) if text[:1] in ("+", "-") else ("+", text)
    number = _parse_uint(rest, base)
    if number is None:
        return None
    if sign == "-":
        return -number if number <= 1 << 63 else None
    return number if number < 1 << 63 else None


def _finite(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) of a text it can read: None for an overflow (ErrRange)."""
    value = float(text)
    return value if math.isfinite(value) else None


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def is_timestamp(text: str) -> bool:
    """resolve.go parseTimestamp: one of the layouts, in range (time.Parse)."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return False
    year, month, day = int(match["y"]), int(match["mo"]), int(match["d"])
    if not 1 <= month <= 12 or not 1 <= day <= _days_in(month, year):
        return False
    hms = match["hms"] or match["hms2"]
    if hms:
        hour, minute, second = (int(part) for part in hms.split(":"))
        if hour > 23 or minute > 59 or second > 59:
            return False
    # time.Parse takes a zone offset up to 24 hours and 60 minutes.
    return not (match["zh"] and (int(match["zh"]) > 24 or int(match["zm"]) > 60))


def _resolve_untagged(text: str, tag: str) -> tuple[str, Any]:
    hint = _HINTS.get(text[:1], "M" if text == "" else "")
    if not hint or tag == STR:
        return STR, text
    if text in _WORDS:
        return _WORDS[text]
    if hint == ".":
        if _DOT_FLOAT.fullmatch(text):
            value = _finite(text)
            if value is not None:
                return FLOAT, value
    elif hint in ("D", "S"):
        if tag in ("", TIMESTAMP) and is_timestamp(text):
            return TIMESTAMP, text
        plain = text.replace("_", "")
        number = _parse_int(plain, 0)
        if number is None:
            number = _parse_uint(plain, 0)
        if number is not None:
            return INT, number
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            value = _finite(plain)
            if value is not None:
                return FLOAT, value
        # Prefixes ParseInt's base 0 leaves (a sign after them: `0b-101`, `0o+17`).
        for prefix, base in (("0b", 2), ("0o", 8)):
            if plain.startswith(prefix):
                number = _parse_int(plain[2:], base)
                if number is None:
                    number = _parse_uint(plain[2:], base)
                if number is not None:
                    return INT, number
            elif plain.startswith("-" + prefix):
                number = _parse_int("-" + plain[3:], base)
                if number is not None:
                    return INT, number
    return STR, text


def resolve(tag: str, text: str) -> tuple[str, Any]:
    """go-yaml v3's resolve(tag, text): (the tag it settles on, the value). `tag` is "" for a
    plain scalar without a tag, else the explicit short tag (`!!int`). A timestamp's value is
    its text; a float may be infinite or NaN. Raises GoYamlError where go-yaml fails."""
    if tag not in _RESOLVABLE:
        return tag, text
    resolved, value = _resolve_untagged(text, tag)
    if tag in ("", resolved, STR):
        return resolved, value
    if tag == FLOAT and resolved == INT:
        return FLOAT, float(value)
    raise GoYamlError(f"cannot decode {resolved} `{text}` as a {tag}")


# --- values as the engine hands them to a program -----------------------------------------


def _json_float(value: float) -> str:
    """encoding/json's float64 (Go 1.26 encode.go floatEncoder): the shortest digits that read
    back, positional from 1e-6 up to 1e21, else with an exponent (`1e+21`, `1.5e-7`)."""
    if value == 0:
        return "0"  # also -0: go-yaml writes it back as `-0`, which reads as the integer 0
    if 1e-6 <= abs(value) < 1e21:
        return format(Decimal(repr(value)).normalize(), "f")
    return re.sub(r"e([-+])0*(\d)", r"e\1\2", repr(value))


def _go_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 64), which is also fmt's %v (Go 1.26 ftoa.go): the
    shortest digits, with an exponent of two or more digits below 1e-4 or from 1e6 on."""
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    point = len(digits) + exponent  # digits before the decimal point
    if point - 1 < -4 or point - 1 >= 6:
        text = "".join(map(str, digits))
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if point < 1 else '+'}{abs(point - 1):02d}"
    return format(Decimal(repr(value)).normalize(), "f")


def key_text(tag: str, value: Any) -> str | None:
    """A mapping key that is not text, as the CLI turns it into text: go-yaml decodes it as a
    value, the CLI writes it back out as YAML and reads it again, and config/object.go
    unmarshalObject prints it with fmt's %v. None where the CLI does not keep it faithfully: a
    timestamp (the machine's time zone decides its text), null ("<nil>", or nothing once
    merged with `<<`) and NaN (a Go map cannot find a NaN key again: its value comes out null).
    """
    if tag in (TIMESTAMP, NULL) or (isinstance(value, float) and math.isnan(value)):
        return None
    if tag == BOOL:
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        text = _go_g(value)  # written back as this, which reads as an integer when it can
        return "0" if text == "-0" else text
    return str(value)


def _json(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # Nested numbers are read back with json.Number: Int64 when it fits, else Float64
        # (config/object.go unmarshalObject), so an unsigned number above 2^63 - 1 turns float.
        return str(value) if -(1 << 63) <= value < 1 << 63 else _json_float(float(value))
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return json.dumps(value)


def engine_text(value: Any) -> str:
    """A top-level config value as the engine hands it to the program: text as it is, null as
    "" (loaders.go checkForEmptyConfig), numbers and booleans as JSON, objects as JSON text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # a top-level number stays the text go-yaml read
    return _json(value)


def coerce_path_value(text: str) -> bool | int | str:
    """A value `pulumi config set --path a.b VALUE` stores below the top level (config/object.go
    coerce): "true"/"false" become booleans, base-10 integers (not starting with 0, optionally
    signed) numbers when int64 or uint64 holds them, everything else stays text (`yes`, `1e3`,
    `05`, `1_000`, `0x1F`, `1.5`)."""
    if text in ("true", "false"):
        return text == "true"
    if len(text) > 1 and text[0] == "0":
        return text
    number = _parse_int(text, 10)
    if number is None:
        number = _parse_uint(text, 10)
    return text if number is None else number
