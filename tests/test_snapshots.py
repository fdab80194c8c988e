"""Golden snapshots: the rendered desired state of every shipped stack is committed under
tests/snapshots/<stack>/, so a code change shows in review what it does to every stack.

After an intended change, refresh them with `python -m tools.update_snapshots` and commit the
result with the change. Also tests the change summary (gpu_cluster/offline/change_summary.py),
which the PR workflow runs."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from gpu_cluster.offline.change_summary import clip_line, compare, stack_markdown, summary
from gpu_cluster.offline.render import FILES, render
from tests.as_of import AS_OF
from tests.conftest import STACKS
from tools.render_all import stacks, write

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
REFRESH = "python -m tools.update_snapshots"
MAX_DIFF_LINES = 120  # per failing stack: enough to see what moved, short enough to read
MAX_LINE_CHARS = 300  # resources.json holds whole scripts on one line


def _snapshot_diff(stack: str, rendered: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for name in FILES:
        path = SNAPSHOTS / stack / name
        if not path.exists():
            lines.append(f"missing snapshot file tests/snapshots/{stack}/{name}\n")
            continue
        lines += difflib.unified_diff(
            path.read_text().splitlines(keepends=True),
            rendered[name].splitlines(keepends=True),
            f"tests/snapshots/{stack}/{name}",
            f"render/{stack}/{name}",
        )
    return [clip_line(line, MAX_LINE_CHARS) for line in lines]


def test_stacks_are_discovered_from_the_stack_files() -> None:
    assert STACKS, "no Pulumi.<stack>.yaml found"
    assert stacks() == STACKS  # what update_snapshots writes is what this test checks


@pytest.mark.parametrize("stack", STACKS)
def test_render_matches_the_snapshot(stack: str) -> None:
    if not (SNAPSHOTS / stack).is_dir():
        pytest.fail(
            f"stack {stack!r} (Pulumi.{stack}.yaml) has no snapshot in tests/snapshots/{stack}/; "
            f"create it with `{REFRESH}` and commit it"
        )
    diff = _snapshot_diff(stack, render(stack, as_of=AS_OF))
    if diff:
        shown = "".join(diff[:MAX_DIFF_LINES])
        more = len(diff) - MAX_DIFF_LINES
        if more > 0:
            shown += (
                f"... {more} more diff lines (see all: `git diff tests/snapshots` after refresh)\n"
            )
        pytest.fail(
            f"the render of stack {stack!r} differs from its golden snapshot "
            f"(- snapshot, + current render):\n{shown}"
            f"If the change is intended, run `{REFRESH}` and commit tests/snapshots/.",
            pytrace=False,
        )


def test_no_snapshot_of_a_removed_stack() -> None:
    extra = sorted(p.name for p in SNAPSHOTS.iterdir() if p.is_dir() and p.name not in STACKS)
    assert not extra, f"snapshots of stacks without a Pulumi.<stack>.yaml: {extra}; run `{REFRESH}`"


# gpu_cluster/offline/change_summary.py


def test_change_summary_of_a_resize_lists_only_changed_resources(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    write(base / "barcelona", render("barcelona", ("nodes=2",)))
    write(head / "barcelona", render("barcelona", ("nodes=3",)))

    change = compare("barcelona", base / "barcelona", head / "barcelona")
    # Per-pod storage: the third pod's claims, which the StatefulSet adopts.
    assert change.added == {
        "kubernetes:core/v1:PersistentVolumeClaim": [
            "gpu-cluster-workload-datasets-2",
            "gpu-cluster-workload-workspace-2",
        ]
    }
    assert change.removed == {}
    assert "kubernetes:apps/v1:StatefulSet" in change.changed
    # The StatefulSet scales; the DeepSpeed hostfile ConfigMap lists the third pod.
    assert set(change.changed) == {"kubernetes:apps/v1:StatefulSet", "kubernetes:core/v1:ConfigMap"}
    assert {"worldSize", "podDnsNames"} <= set(change.outputs)

    text = summary(base, head)
    assert "### `barcelona`: 2 added, 0 removed, 2 changed" in text
    assert "| changed | `kubernetes:apps/v1:StatefulSet` | `" in text
    assert "| removed |" not in text
    assert (
        "```diff\n--- base/barcelona/kubernetes.yaml\n+++ head/barcelona/kubernetes.yaml\n" in text
    )
    assert "-  replicas: 2\n+  replicas: 3\n" in text
    assert text.count("```") == 2  # one diff block, closed


def test_change_summary_of_identical_renders_says_no_change(tmp_path: Path) -> None:
    files = render("nerc-production")
    write(tmp_path / "base" / "nerc-production", files)
    write(tmp_path / "head" / "nerc-production", files)
    text = summary(tmp_path / "base", tmp_path / "head")
    assert "### `nerc-production`: no change" in text
    assert "None of the 1 stacks changes." in text
    assert "```" not in text


def _fake_render(root: Path, stack: str, resources: list[tuple[str, str, int]]) -> None:
    rows = [
        {"type": t, "name": n, "parent": "", "inputs": {"v": v}, "options": {}}
        for t, n, v in resources
    ]
    write(
        root / stack,
        {
            "kubernetes.yaml": "".join(
                f"kind: {t}\nname: {n}\nv: {v}\n---\n" for t, n, v in resources
            ),
            "resources.json": json.dumps(rows),
            "outputs.json": "{}",
        },
    )


def test_change_summary_groups_added_removed_and_new_stacks_by_type(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    _fake_render(
        base, "one", [("k8s:Service", "a", 1), ("k8s:Service", "b", 1), ("k8s:Pod", "p", 1)]
    )
    _fake_render(head, "one", [("k8s:Service", "a", 2), ("k8s:Pod", "p", 1), ("k8s:Pod", "q", 1)])
    _fake_render(head, "two", [("k8s:Pod", "x", 1)])
    text = summary(base, head, max_diff_lines=3)
    one = text.split("### `one`", 1)[1].split("### ", 1)[0]
    assert ": 1 added, 1 removed, 1 changed" in one
    assert "| added | `k8s:Pod` | `q` |" in one
    assert "| removed | `k8s:Service` | `b` |" in one
    assert "| changed | `k8s:Service` | `a` |" in one
    assert "more diff lines" in one  # truncated to 3 lines
    assert "### `two` (new stack): 1 added, 0 removed, 0 changed" in text
    assert "2 of 2 stacks change: `one`, `two`." in text


def test_change_summary_fence_survives_backticks_in_the_yaml(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    _fake_render(base, "s", [("k8s:ConfigMap", "readme", 1)])
    _fake_render(head, "s", [("k8s:ConfigMap", "readme", 2)])
    (head / "s" / "kubernetes.yaml").write_text("data: |\n  ```bash\n  run\n  ```\n")
    markdown = stack_markdown(compare("s", base / "s", head / "s"))
    assert "````diff\n" in markdown and markdown.rstrip().endswith("</details>")


def test_change_summary_cuts_very_long_lines(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    _fake_render(base, "s", [("k8s:ConfigMap", "big", 1)])
    _fake_render(head, "s", [("k8s:ConfigMap", "big", 2)])
    (head / "s" / "kubernetes.yaml").write_text("data: " + "x" * 5000 + "\n")
    markdown = stack_markdown(compare("s", base / "s", head / "s"))
    assert "x" * 5000 not in markdown and "more characters)" in markdown
