"""Golden snapshots: the rendered desired state of every shipped stack is committed under
tests/snapshots/, so a code change shows what it does to every stack in review.

Refresh after an intended change: `python -m tools.update_snapshots`."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from components.render import FILES, render
from tests.conftest import STACKS
from tools.change_summary import summary
from tools.render_all import render_all

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
REFRESH = "python -m tools.update_snapshots"


@pytest.mark.parametrize("stack", STACKS)
def test_render_matches_the_snapshot(stack: str) -> None:
    assert (SNAPSHOTS / stack).is_dir(), f"no snapshot for stack {stack!r}: run `{REFRESH}`"
    for name, content in render(stack).items():
        expected = (SNAPSHOTS / stack / name).read_text()
        if content != expected:
            diff = "".join(
                difflib.unified_diff(
                    expected.splitlines(keepends=True),
                    content.splitlines(keepends=True),
                    f"snapshot/{stack}/{name}",
                    f"render/{stack}/{name}",
                )
            )
            pytest.fail(f"{stack}/{name} changed; if intended, run `{REFRESH}`:\n{diff[:6000]}")


def test_no_snapshot_for_a_removed_stack() -> None:
    assert sorted(p.name for p in SNAPSHOTS.iterdir() if p.is_dir()) == STACKS


def test_change_summary_shows_a_resize_as_one_changed_statefulset(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    render_all(base)
    render_all(head)
    for name, content in render("barcelona", ("nodes=3",)).items():
        (head / "barcelona" / name).write_text(content)
    text = summary(base, head)
    assert "### `nerc-production`: no change" in text
    barcelona = text.split("### `barcelona`", 1)[1].split("### ", 1)[0]
    assert "| `kubernetes:apps/v1:StatefulSet` | 0 | 0 | 1 |" in barcelona
    assert "| `kubernetes:core/v1:ConfigMap` | 0 | 0 | 1 |" in barcelona  # hostfile
    assert barcelona.count("| `") == 2  # nothing added or removed, nothing else changed
    assert "-  replicas: 2\n+  replicas: 3" in barcelona
    assert sorted(FILES) == sorted(p.name for p in (head / "barcelona").iterdir())
