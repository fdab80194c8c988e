"""Markdown summary of what changes between two renders (base and head, one subdir per stack):
resources added, removed and changed by type, then the Kubernetes YAML diff.

    python -m tools.change_summary BASE_DIR HEAD_DIR
"""

from __future__ import annotations

import difflib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

MAX_DIFF_LINES = 400


def _resources(stack_dir: Path) -> dict[tuple[str, str], Any]:
    path = stack_dir / "resources.json"
    if not path.exists():
        return {}
    return {(r["type"], r["name"]): r for r in json.loads(path.read_text())}


def _text(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True) if path.exists() else []


def stack_summary(stack: str, base: Path, head: Path) -> str:
    before, after = _resources(base), _resources(head)
    added = Counter(t for t, _ in after.keys() - before.keys())
    removed = Counter(t for t, _ in before.keys() - after.keys())
    changed = Counter(
        t for key in before.keys() & after.keys() if before[key] != after[key] for t in [key[0]]
    )
    if not (added or removed or changed):
        return f"### `{stack}`: no change\n"
    lines = [f"### `{stack}`", "", "| type | added | removed | changed |", "|---|---|---|---|"]
    for type_ in sorted(added.keys() | removed.keys() | changed.keys()):
        lines.append(f"| `{type_}` | {added[type_]} | {removed[type_]} | {changed[type_]} |")
    diff = list(
        difflib.unified_diff(
            _text(base / "kubernetes.yaml"),
            _text(head / "kubernetes.yaml"),
            f"base/{stack}/kubernetes.yaml",
            f"head/{stack}/kubernetes.yaml",
        )
    )
    if diff:
        shown = diff[:MAX_DIFF_LINES]
        more = len(diff) - len(shown)
        lines += ["", "```diff", "".join(shown).rstrip("\n"), "```"]
        if more:
            lines.append(f"({more} more diff lines; render locally with `--diff` to see all)")
    return "\n".join(lines) + "\n"


def summary(base_root: Path, head_root: Path) -> str:
    stacks = sorted(
        {
            p.name
            for root in (base_root, head_root)
            if root.exists()
            for p in root.iterdir()
            if p.is_dir()
        }
    )
    parts = ["## Desired-state changes (offline render)", ""]
    parts += [stack_summary(stack, base_root / stack, head_root / stack) for stack in stacks]
    return "\n".join(parts)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.stdout.write(summary(Path(sys.argv[1]), Path(sys.argv[2])))
