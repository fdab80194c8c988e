"""GCP_REPLACE_ON (gpu_cluster/offline/replacements.py) against the Terraform provider's source.

tests/vendor/gcp_force_new.json holds, per Google Cloud type the program registers, the fields
the provider's schema marks `ForceNew: true` (file:line in hashicorp/terraform-provider-google-beta
at the version the file names), written by `python -m tools.provider_force_new SOURCE`. A field
whose elements are blocks ("blocks") forces a replacement only when a block comes or goes; each
field inside has its own ForceNew. The program's table writes a path that replaces on any change
at or below it. Held against the inputs of the renders the edit matrix reads:

- every path of the table is ForceNew in the source;
- every ForceNew field the program sets is at or below a path of the table (a block field:
  when the program sets it in one render of a resource and not in another);
- below a table path that is a block field, a field that is not ForceNew holds one value in
  every render of a resource, so the table's coarser path predicts no replacement the provider
  would not make.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from gpu_cluster.offline.replacements import GCP_REPLACE_ON, Key, Row
from tests.conftest import rows, run_stack
from tests.test_edit_matrix import FROM_DEPLOYED, MATRIX

VENDOR = json.loads((Path(__file__).parent / "vendor" / "gcp_force_new.json").read_text())
FORCE_NEW: dict[str, dict[str, str]] = {t: r["forceNew"] for t, r in VENDOR["resources"].items()}
BLOCKS: dict[str, set[str]] = {t: set(r["blocks"]) for t, r in VENDOR["resources"].items()}
GKE_STACKS = ("a3-high", "gcp-a3", "gcp-a4")
# Settings the matrices do not reach whose resources are in the table.
EXTRA = (("gcp-a3", ("gcp.placementMaxDistance=2",)),)


def variants() -> Iterator[tuple[str, tuple[str, ...]]]:
    yield from ((s, ()) for s in GKE_STACKS)
    yield from MATRIX
    for stack, deployed, edit in FROM_DEPLOYED:
        yield stack, deployed
        yield stack, (*deployed, *edit)
    yield from EXTRA


@cache
def renders() -> dict[Key, list[Row]]:
    """Every Google Cloud resource's rows, one per render it appears in."""
    out: dict[Key, list[Row]] = defaultdict(list)
    for stack, overrides in dict.fromkeys(variants()):
        if stack in GKE_STACKS:
            for key, row in rows(run_stack(stack, *overrides)).items():
                if key[0].startswith("gcp:"):
                    out[key].append(row)
    return out


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of each scalar, empty or scalar-list input, lists of objects as `[*]`."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        for v in value:
            yield from leaves(v, path + "[*]")
    else:
        yield path, value


def at_or_below(path: str, top: str) -> bool:
    return path == top or path.startswith((top + ".", top + "["))


def set_paths(row: Row) -> set[str]:
    return {p for p, _ in leaves(row.get("inputs") or {})}


def test_every_table_type_is_in_the_source_and_rendered() -> None:
    assert set(GCP_REPLACE_ON) <= set(FORCE_NEW)
    assert set(GCP_REPLACE_ON) <= {type_ for type_, _ in renders()}


def test_every_table_path_is_force_new_in_the_provider_source() -> None:
    wrong = [(t, p) for t, paths in GCP_REPLACE_ON.items() for p in paths if p not in FORCE_NEW[t]]
    assert wrong == []


def test_every_force_new_field_the_program_sets_is_in_the_table() -> None:
    missing = set()
    for (type_, _), versions in renders().items():
        table = GCP_REPLACE_ON.get(type_, ())
        present = [set_paths(row) for row in versions]
        for field, line in FORCE_NEW[type_].items():
            set_in = [any(at_or_below(p, field) for p in paths) for paths in present]
            needed = any(set_in) and (field not in BLOCKS[type_] or not all(set_in))
            if needed and not any(at_or_below(field, t) for t in table):
                missing.add((type_, field, line))
    assert sorted(missing) == []


def test_below_a_table_block_what_updates_in_place_never_changes() -> None:
    """A table path that is a block field replaces on any change below it; the provider only
    on its ForceNew fields there (and the block coming or going)."""
    varying = set()
    for (type_, name), versions in renders().items():
        # ForceNew fields whose whole value replaces (not blocks).
        whole = [f for f in FORCE_NEW[type_] if f not in BLOCKS[type_]]
        for top in set(GCP_REPLACE_ON.get(type_, ())) & BLOCKS[type_]:
            values: dict[str, set[str]] = defaultdict(set)
            for row in versions:
                for path, value in leaves(row.get("inputs") or {}):
                    if at_or_below(path, top) and not any(at_or_below(path, f) for f in whole):
                        values[path].add(json.dumps(value, sort_keys=True))
            varying |= {(type_, name, p) for p, seen in values.items() if len(seen) > 1}
    assert sorted(varying) == []
