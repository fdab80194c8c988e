"""examples/checkpointing/train.py, the recovery contract's example (issue #40), as a local
process on CPU: stopped by SIGTERM it saves where it is and exits 143; started again it resumes
from the newest complete checkpoint, never from a save cut short, and ends exactly where a run
that never stopped ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from tests.conftest import ROOT

SCRIPT = ROOT / "examples" / "checkpointing" / "train.py"
# Bounds a run that hangs (a SIGTERM never acted on); never a measure of speed.
HANG_S = 600
STEPS = 40


def train(checkpoints: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--checkpoint-dir", str(checkpoints), *args],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=HANG_S,
    )


def final_state(checkpoints: Path) -> dict[str, torch.Tensor]:
    complete = sorted(d for d in checkpoints.glob("step-*") if (d / "COMPLETE").is_file())
    newest = complete[-1]
    state = torch.load(newest / "state.pt", weights_only=True)
    assert state["step"] == STEPS
    model: dict[str, torch.Tensor] = state["model"]
    return model


def test_a_run_stopped_by_sigterm_resumes_where_it_saved_and_ends_as_one_never_stopped(
    tmp_path: Path,
) -> None:
    straight = train(tmp_path / "straight", "--steps", str(STEPS), "--save-every", "5")
    assert straight.returncode == 0, straight.stderr

    stopped = tmp_path / "stopped"
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--checkpoint-dir", str(stopped), "--steps", "1000000",
         "--save-every", "5", "--step-seconds", "0.2"],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    # Mid-run, between two saves: past step 7 (5 is saved, 10 not yet).
    for line in process.stdout:
        if line.startswith("step 7 "):
            break
    process.send_signal(signal.SIGTERM)
    rest, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 143, err
    (saved_line,) = [line for line in rest.splitlines() if line.startswith("SIGTERM: saved ")]
    saved = Path(saved_line.removeprefix("SIGTERM: saved "))
    step = int(saved.name.removeprefix("step-"))
    assert 7 <= step < STEPS, rest
    assert (saved / "COMPLETE").is_file()
    # A later save cut short (killed after its grace period): no COMPLETE, never loaded.
    (stopped / "step-00000999").mkdir()
    (stopped / "step-00000999" / "state.pt").write_bytes(b"cut short")

    resumed = train(stopped, "--steps", str(STEPS), "--save-every", "5")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == f"resumed from step {step} ({saved})"
    assert resumed.stdout.splitlines()[1].startswith(f"step {step + 1} ")
    expected, got = final_state(tmp_path / "straight"), final_state(stopped)
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected)
