"""timelineCommand's `first step` (launcher.firstStepPattern, issue #20): read from pod 0's
training container log through the real API server and kubectl, as a project's user with the
`view` role reads it. kwok serves the log as a kubelet does (the kubelet's CRI log reader, from
the file the control plane names: ControlPlane.training_log), with the kubelet's timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import stack_context
from tests.real.cluster_state import bring_up, paste
from tests.real.conftest import Cluster
from tests.real.test_timeline_rights import namespace_viewer
from tools.realtier.stacks import render

pytestmark = pytest.mark.real

STEP = r"^step 1\b"


def cri_line(at: datetime, text: str) -> str:
    """One line as the kubelet keeps a container's output (CRI logging format)."""
    return f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}123Z stdout F {text}\n"


def test_the_first_step_is_when_pod_0_first_printed_the_stack_s_step_line(
    cluster: Cluster, tmp_path: Path
) -> None:
    overrides = (f"launcher.firstStepPattern={STEP}",)
    stack = render("barcelona", overrides)
    bring_up(cluster, stack, overrides, tmp_path)
    viewer = {"token": namespace_viewer(cluster, stack.settings.namespace)}
    command = stack.run.outputs["timelineCommand"]
    context = stack_context("barcelona")

    # Loading, not stepping yet: the phase is there, with no time.
    began = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=30)
    log = cluster.plane.training_log
    log.write_text(cri_line(began, "loading the model") + cri_line(began, "step 10 (a warm-up)"))
    at = rows(paste(cluster, tmp_path, context, command, user=viewer))
    assert at["first step"] == "-"

    # Step 1 and later ones: the first of them, to the second.
    with log.open("a") as out:
        out.write(cri_line(began + timedelta(seconds=7), "step 1 loss 11.02"))
        out.write(cri_line(began + timedelta(seconds=9), "step 1 loss 10.80 (again)"))
    printed = paste(cluster, tmp_path, context, command, user=viewer)
    at = rows(printed)
    assert list(at)[-1] == "first step", printed
    first = began + timedelta(seconds=7)
    assert at["first step"] == first.strftime("%Y-%m-%d %H:%M:%S"), printed
    assert at["ready"] < at["first step"], printed


def rows(printed: str) -> dict[str, str]:
    """timelineCommand's table: phase -> when (UTC), '-' when not there."""
    phases = [line for line in printed.splitlines()[1:] if not line.startswith("(")]
    return {line[:14].strip(): line[14:36].strip() for line in phases}
