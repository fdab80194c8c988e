"""The change summary lists first what a change would destroy or recreate among data-holding or
slow resources, with the field that forces each replacement."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_cluster.offline.change_summary import compare, summary
from gpu_cluster.offline.cli import main
from gpu_cluster.offline.render import render
from tools.render_all import write


def _renders(tmp_path: Path, stack: str, *edit: str) -> tuple[Path, Path]:
    base, head = tmp_path / "base", tmp_path / "head"
    write(base / stack, render(stack, ()))
    write(head / stack, render(stack, edit))
    return base, head


def test_claim_replacements_come_first_with_the_forcing_field(tmp_path: Path) -> None:
    base, head = _renders(tmp_path, "nerc-production", "storage.storageClass=fast")
    text = summary(base, head)
    assert "**Replaces or deletes data-holding or slow resources:** `nerc-production`" in text
    first_table = text.index("replacement(s) or deletion(s) of data-holding or slow resources")
    assert first_table < text.index("| | type | resources |") < text.index("```diff")
    row = (
        "| replace (refused: protected) | `kubernetes:core/v1:PersistentVolumeClaim` | "
        "`gpu-cluster-workload-workspace` | `spec.storageClassName` |"
    )
    assert row in text


def test_gke_zone_change_names_the_cluster_and_pool_and_why(tmp_path: Path) -> None:
    base, head = _renders(tmp_path, "a3-high", "gcp.zone=us-central1-b")
    change = compare("a3-high", base / "a3-high", head / "a3-high")
    assert [(s.type, s.op, s.fields, s.protected) for s in change.destructive] == [
        ("gcp:container/cluster:Cluster", "replace", ("location",), True),
        ("gcp:container/nodePool:NodePool", "replace", ("location",), False),
        ("gcp:container/nodePool:NodePool", "replace", ("location",), False),  # GPU and system
    ]


@pytest.mark.parametrize(
    ("stack", "edit", "row"),
    [
        # Any change of a JobSet's spec replaces it (replaceOnChanges): the run starts again.
        (
            "gcp-a4",
            "monitoring.runMetrics.enabled=true",
            "| **replace** | `kubernetes:jobset.x-k8s.io/v1alpha2:JobSet` | "
            "`gpu-cluster-workload` | `spec` |",
        ),
        # A StatefulSet's new pod template replaces every pod.
        (
            "barcelona",
            "monitoring.runMetrics.enabled=true",
            "| **update** | `kubernetes:apps/v1:StatefulSet` | `gpu-cluster-workload` | "
            "`spec.template` |",
        ),
    ],
    ids=["jobset", "statefulset"],
)
def test_an_edit_that_restarts_the_training_says_so(
    tmp_path: Path, stack: str, edit: str, row: str
) -> None:
    base, head = _renders(tmp_path, stack, edit)
    text = summary(base, head)
    assert f"**Restarts the training:** `{stack}`." in text
    assert "change(s) that stop or restart the training pods" in text
    assert row in text


def test_a_resize_destroys_nothing(tmp_path: Path) -> None:
    base, head = _renders(tmp_path, "barcelona", "nodes=4")
    change = compare("barcelona", base / "barcelona", head / "barcelona")
    assert change.is_changed and change.destructive == []
    # It restarts the training: every pod's world size (NNODES, WORLD_SIZE) changes.
    assert [(s.type, s.op, s.fields) for s in change.restarts] == [
        ("kubernetes:apps/v1:StatefulSet", "update", ("spec.template",))
    ]
    assert "data-holding" not in summary(base, head)


def test_a_retained_namespace_is_shown_as_staying_and_a_deleted_one_in_bold(tmp_path: Path) -> None:
    """A namespace dropped from the program (namespaceMode reference) only leaves the state
    while it is retained; with both opt-outs deployed it is deleted, claims and all."""
    stack, base, head = "gcp-a3", tmp_path / "base", tmp_path / "head"
    namespace = "`kubernetes:core/v1:Namespace` | `gpu-cluster-namespace` | removed |"
    write(base / stack, render(stack, ()))
    write(head / stack, render(stack, ("namespaceMode=reference",)))
    assert f"| delete (retained: the object stays in the cluster) | {namespace}" in summary(
        base, head
    )
    opted_out = ("storage.retainOnDelete=false", "storage.protect=false")
    write(base / stack, render(stack, opted_out))
    write(head / stack, render(stack, (*opted_out, "namespaceMode=reference")))
    assert f"| **delete** | {namespace}" in summary(base, head)


@pytest.mark.parametrize("lines", ["-1", "-100", "ten"])
def test_a_diff_line_count_below_zero_or_not_a_number_is_refused(
    tmp_path: Path, lines: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A negative count sliced the diff from its end and misreported the lines left out.
    with pytest.raises(SystemExit) as stopped:
        main(["summary", str(tmp_path), str(tmp_path), f"--max-diff-lines={lines}"])
    assert stopped.value.code == 2
    assert f"--max-diff-lines: '{lines}'" in capsys.readouterr().err
