"""Markdown summary of what a change does to the desired state of every stack.

    python -m tools.render_all BASE_DIR      # on the base revision
    python -m tools.render_all HEAD_DIR      # on the change
    gpu-cluster summary BASE_DIR HEAD_DIR      # or python -m tools.change_summary

Each directory holds one subdirectory per stack, as `python -m gpu_cluster.offline --out`
writes it. Per stack the summary lists first the replacements and deletions of data-holding or
slow resources (claims, namespace, cluster, node pool, VPCs) with the field that forces each
replacement, whether `protect` makes the engine refuse it and whether `retainOnDelete` leaves
the object in the cluster (gpu_cluster.offline.replacements),
then the resources added, removed and changed, grouped by type (from `resources.json`, keyed by
type and name), the stack outputs that changed, then the unified diff of `kubernetes.yaml` in a
```diff block. Exit code 0 (also when something changed), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_cluster.offline.replacements import (
    PRECIOUS,
    Row,
    Step,
    destructive,
    index,
    plan,
    training_restarts,
)

# Per stack: enough to review a resize or a setting change in place, small enough that four
# stacks stay far below GitHub's limits (65,536 characters per comment, 1 MiB per job summary).
MAX_DIFF_LINES = 300
MAX_LINE_CHARS = 1000  # a diff line longer than this is cut (long JSON or annotations)

Key = tuple[str, str]  # (type, name)


@dataclass
class StackChange:
    """How one stack's render differs between base and head."""

    stack: str
    in_base: bool
    in_head: bool
    added: dict[str, list[str]] = field(default_factory=dict)  # type -> names
    removed: dict[str, list[str]] = field(default_factory=dict)
    changed: dict[str, list[str]] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)  # names of outputs added/removed/changed
    # Replacements and deletions of precious resources (gpu_cluster.offline.replacements.PRECIOUS).
    destructive: list[Step] = field(default_factory=list)
    # What stops or restarts the training pods (replacements.training_restarts).
    restarts: list[Step] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)  # kubernetes.yaml unified diff lines

    @property
    def is_changed(self) -> bool:
        return bool(
            self.in_base != self.in_head
            or self.added
            or self.removed
            or self.changed
            or self.outputs
            or self.diff
        )


def _resources(stack_dir: Path) -> dict[Key, Row]:
    path = stack_dir / "resources.json"
    return index(json.loads(path.read_text())) if path.exists() else {}


def _outputs(stack_dir: Path) -> dict[str, Any]:
    path = stack_dir / "outputs.json"
    outputs: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return outputs


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True) if path.exists() else []


def _by_type(keys: set[Key]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for type_, name in sorted(keys):
        grouped[type_].append(name)
    return dict(grouped)


def clip_line(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """A diff line cut to `limit` characters, saying how many were left out."""
    body = line.rstrip("\n")
    if len(body) > limit:
        body = f"{body[:limit]}... ({len(body) - limit} more characters)"
    return body + "\n"


def compare(stack: str, base: Path, head: Path) -> StackChange:
    """Compare one stack's render directories (either may be missing)."""
    before, after = _resources(base), _resources(head)
    steps = plan(before, after)
    old_out, new_out = _outputs(base), _outputs(head)
    diff = difflib.unified_diff(
        _lines(base / "kubernetes.yaml"),
        _lines(head / "kubernetes.yaml"),
        f"base/{stack}/kubernetes.yaml",
        f"head/{stack}/kubernetes.yaml",
    )
    return StackChange(
        stack=stack,
        in_base=base.is_dir(),
        in_head=head.is_dir(),
        added=_by_type(after.keys() - before.keys()),
        removed=_by_type(before.keys() - after.keys()),
        changed=_by_type({k for k in before.keys() & after.keys() if before[k] != after[k]}),
        outputs=sorted(
            k for k in old_out.keys() | new_out.keys() if old_out.get(k) != new_out.get(k)
        ),
        destructive=destructive(steps),
        restarts=training_restarts(steps, before, after),
        diff=[clip_line(line) for line in diff],
    )


def _count(grouped: dict[str, list[str]]) -> int:
    return sum(len(names) for names in grouped.values())


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside `text` (scripts embed markdown)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def stack_markdown(change: StackChange, max_diff_lines: int = MAX_DIFF_LINES) -> str:
    title = f"### `{change.stack}`"
    if not change.is_changed:
        return f"{title}: no change\n"
    counts = (
        f"{_count(change.added)} added, {_count(change.removed)} removed, "
        f"{_count(change.changed)} changed"
    )
    if not change.in_base:
        title += " (new stack)"
    elif not change.in_head:
        title += " (stack removed)"
    lines = [
        f"{title}: {counts}",
        "",
        *_destructive_markdown(change.destructive),
        *_restarts_markdown(change.restarts),
    ]
    rows = [
        (what, type_, names)
        for what, grouped in (
            ("added", change.added),
            ("removed", change.removed),
            ("changed", change.changed),
        )
        for type_, names in sorted(grouped.items())
    ]
    if rows:
        lines += ["| | type | resources |", "|---|---|---|"]
        lines += [
            f"| {what} | `{type_}` | {', '.join(f'`{n}`' for n in names)} |"
            for what, type_, names in rows
        ]
        lines.append("")
    if change.outputs:
        lines += [f"Stack outputs changed: {', '.join(f'`{o}`' for o in change.outputs)}", ""]
    if change.diff:
        shown = "".join(change.diff[:max_diff_lines])
        fence = _fence(shown)
        lines += [
            "<details open><summary><code>kubernetes.yaml</code> diff</summary>",
            "",
            f"{fence}diff",
            shown.rstrip("\n"),
            fence,
        ]
        if len(change.diff) > max_diff_lines:
            lines += [
                "",
                f"... {len(change.diff) - max_diff_lines} more diff lines; the whole diff: "
                f"`python -m gpu_cluster.offline --stack {change.stack} "
                f"--diff BASE_DIR/{change.stack}`",
            ]
        lines += ["", "</details>", ""]
    return "\n".join(lines)


def _destructive_markdown(steps: list[Step]) -> list[str]:
    """The table a reviewer must read first: what would be destroyed or recreated."""
    if not steps:
        return []
    lines = [
        f"**{len(steps)} replacement(s) or deletion(s) of data-holding or slow resources:**",
        "",
        "| | type | resource | forced by | why it matters |",
        "|---|---|---|---|---|",
    ]
    for s in steps:
        if s.protected:
            op = f"{s.op} (refused: protected)"
        elif s.retained:
            # Only the state forgets it: a namespace dropped this way keeps its claims.
            op = f"{s.op} (retained: the object stays in the cluster)"
        else:
            op = f"**{s.op}**"
        forced = ", ".join(f"`{f}`" for f in s.fields) or ("removed" if s.op == "delete" else "")
        lines.append(f"| {op} | `{s.type}` | `{s.name}` | {forced} | {PRECIOUS[s.type]} |")
    return [*lines, ""]


def _restarts_markdown(steps: list[Step]) -> list[str]:
    """What stops the training running on the stack: its pods end, a run starts again from its
    last checkpoint."""
    if not steps:
        return []
    lines = [
        f"**{len(steps)} change(s) that stop or restart the training pods** (a running run starts "
        "again from its last checkpoint):",
        "",
        "| | type | resource | forced by |",
        "|---|---|---|---|",
    ]
    for s in steps:
        forced = ", ".join(f"`{f}`" for f in s.fields) or ("removed" if s.op == "delete" else "")
        lines.append(f"| **{s.op}** | `{s.type}` | `{s.name}` | {forced} |")
    return [*lines, ""]


def _stacks(*roots: Path) -> list[str]:
    return sorted({p.name for root in roots if root.is_dir() for p in root.iterdir() if p.is_dir()})


def summary(base_root: Path, head_root: Path, max_diff_lines: int = MAX_DIFF_LINES) -> str:
    """The markdown summary for every stack rendered under either root."""
    changes = [
        compare(stack, base_root / stack, head_root / stack)
        for stack in _stacks(base_root, head_root)
    ]
    touched = [c.stack for c in changes if c.is_changed]
    head = ["## Desired-state changes (offline render)", ""]
    if not changes:
        head.append("No stack was rendered.")
    elif touched:
        head.append(
            f"{len(touched)} of {len(changes)} stacks change: "
            + ", ".join(f"`{s}`" for s in touched)
            + "."
        )
    else:
        head.append(f"None of the {len(changes)} stacks changes.")
    risky = [c.stack for c in changes if c.destructive]
    if risky:
        head += [
            "",
            "**Replaces or deletes data-holding or slow resources:** "
            + ", ".join(f"`{s}`" for s in risky)
            + " (see each stack's first table).",
        ]
    restarted = [c.stack for c in changes if c.restarts]
    if restarted:
        head += ["", "**Restarts the training:** " + ", ".join(f"`{s}`" for s in restarted) + "."]
    head.append("")
    return "\n".join(head + [stack_markdown(c, max_diff_lines) for c in changes])


def _line_count(text: str) -> int:
    """A --max-diff-lines value: 0 or more (a negative one would slice the diff from its end and
    misreport how many lines were left out)."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: 0 or more lines")
    return count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The summary's arguments, for `gpu-cluster summary` and `python -m tools.change_summary`."""
    parser.add_argument("base", type=Path, help="render of the base (one subdir per stack)")
    parser.add_argument("head", type=Path, help="render of the change (one subdir per stack)")
    parser.add_argument(
        "--max-diff-lines",
        type=_line_count,
        default=MAX_DIFF_LINES,
        help=f"kubernetes.yaml diff lines shown per stack (default {MAX_DIFF_LINES})",
    )


def write_summary(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Write the summary of `args` (parsed by `parser`, add_arguments') to stdout."""
    if not args.head.is_dir():
        parser.error(f"{args.head} is not a directory")
    sys.stdout.write(summary(args.base, args.head, args.max_diff_lines))
    return 0
