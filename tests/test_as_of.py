"""Issue 22: a render is a function of its inputs and one date. --as-of pins it (an ended
support window is then refused); without it the render takes today's, and an ended window is a
warning, as under `pulumi preview`. gcp-a3 runs GKE 1.35, which leaves standard support on
2027-04-11 (facts/gpudirect.py GKE_END_OF_STANDARD_SUPPORT)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from gpu_cluster.config import dates
from gpu_cluster.config.dates import pinned
from gpu_cluster.offline.cli import offline_main as main
from gpu_cluster.offline.engine import run_program
from gpu_cluster.offline.render import FILES
from gpu_cluster.offline.stack_files import engine_config
from tests.as_of import AS_OF
from tests.conftest import other_warnings

ENDED = (
    "gpu-cluster:gcp.minMasterVersion = '1.35': GKE 1.35 left standard support on 2027-04-11 "
    "(as of 2027-04-12); use 1.36"
)


def rendered(out: Path) -> dict[str, str]:
    return {name: (out / name).read_text() for name in FILES}


def render_on(
    day: date, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, dict[str, str] | None]:
    """The render CLI's exit code and files for gcp-a3 with `args`, run on `day` (the clock's
    date, not an --as-of)."""
    monkeypatch.setattr(dates, "today", lambda: day)
    out = tmp_path / f"{day}-{len(list(tmp_path.iterdir()))}"
    code = main(["--stack", "gcp-a3", "--out", str(out), *args])
    return code, rendered(out) if out.exists() else None


def test_the_same_as_of_renders_the_same_whatever_day_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    as_of = ("--as-of", str(AS_OF.day))
    # Before the end, and a year after it: the clock plays no part.
    first = render_on(date(2026, 12, 1), tmp_path, monkeypatch, *as_of)
    assert first[0] == 0
    assert render_on(date(2028, 4, 12), tmp_path, monkeypatch, *as_of) == first
    warnings = [w for w in capsys.readouterr().err.splitlines() if w.startswith("warning: ")]
    assert other_warnings([w.removeprefix("warning: ") for w in warnings]) == []
    # The date decides whether a stack renders, never what it renders.
    assert render_on(AS_OF.day, tmp_path, monkeypatch) == first


def test_an_ended_window_is_refused_as_of_a_date_and_a_warning_on_todays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on_time = render_on(AS_OF.day, tmp_path, monkeypatch)
    capsys.readouterr()
    refused = render_on(AS_OF.day, tmp_path, monkeypatch, "--as-of", "2027-04-12")
    assert refused == (2, None)
    err = capsys.readouterr().err
    assert err.startswith("error: invalid stack config:\n")
    # The stack file's line of the key, then the key, its end date and the date checked as of.
    assert f"Pulumi.gcp-a3.yaml:27: {ENDED}" in err
    # Today's date is past the end: the same stack renders the same files, and says why not.
    assert render_on(date(2027, 4, 12), tmp_path, monkeypatch) == on_time
    assert capsys.readouterr().err.count(f"warning: {ENDED}") == 1


def test_the_program_under_pulumi_up_checks_as_of_today_and_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No caller pins a date there: read_settings asks for today's, and does not refuse."""
    monkeypatch.setattr(dates, "today", lambda: date(2027, 4, 12))
    run = run_program(*engine_config("gcp-a3"), "gcp-a3")
    assert other_warnings(run.warnings) == [
        ENDED + " (docs/operations.md: moving a stack to the next GKE release)"
    ]
    assert run.of_type("gcp:container/cluster:Cluster")


def test_the_render_warns_in_the_notice_period_before_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ending = (
        "warning: gpu-cluster:gcp.minMasterVersion = '1.35': GKE 1.35 leaves standard support "
        "on 2027-04-11, 41 days after 2027-03-01"
    )
    for args in ((), ("--as-of", "2027-03-01")):
        assert render_on(date(2027, 3, 1), tmp_path, monkeypatch, *args)[0] == 0
        assert ending in capsys.readouterr().err


def test_an_openshift_stack_has_no_date_to_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--stack", "barcelona", "--out", str(tmp_path), "--as-of", "2099-01-01"]) == 0
    warnings = [w for w in capsys.readouterr().err.splitlines() if w.startswith("warning: ")]
    assert other_warnings([w.removeprefix("warning: ") for w in warnings]) == []


@pytest.mark.parametrize("text", ["2026-02-30", "20261123", "2026-W48-1", "23/11/2026", ""])
def test_a_bad_as_of_is_refused_before_anything_is_written(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["--stack", "gcp-a3", "--out", str(out), "--as-of", text]) == 2
    assert capsys.readouterr().err == (
        f"error: --as-of {text!r}: not a date; give one as YYYY-MM-DD\n"
    )
    assert not out.exists()


def test_as_of_takes_the_iso_date() -> None:
    assert pinned("2026-11-23") == AS_OF
