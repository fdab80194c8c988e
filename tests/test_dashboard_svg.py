"""`gpu-cluster dashboard`'s picture (offline/dashboard_svg.py) from given answers, and the
command's refusals. What it draws from a real Prometheus scraping a real launcher:
tests/real/test_run_metrics_prometheus.py."""

from __future__ import annotations

import math
import socket
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpu_cluster.offline.cli import main
from gpu_cluster.offline.dashboard_cli import PrometheusError, matrix_of
from gpu_cluster.offline.dashboard_svg import (
    CHART_HEIGHT,
    LEGEND_SHOWN,
    NO_DATA,
    PanelData,
    Series,
    legend_name,
    picture,
    shown,
)
from gpu_cluster.plan.dashboard import Panel, Unit

SVG = "{http://www.w3.org/2000/svg}"
STEP_TIME = Panel("Step time per rank", "q", Unit.SECONDS, "{{run}} rank {{rank}}")


def drawn(*series: Series, panel: Panel = STEP_TIME) -> ET.Element:
    """The picture of one row with one panel holding `series` over t = 0..100."""
    return ET.fromstring(picture("t", [("Runs", [PanelData(panel, series)])], 0.0, 100.0))


def lines(root: ET.Element) -> list[list[tuple[float, float]]]:
    return [
        [(float(x), float(y)) for x, y in (p.split(",") for p in line.get("points", "").split())]
        for line in root.iter(f"{SVG}polyline")
    ]


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def test_a_series_spans_the_chart_from_zero_to_its_highest_value() -> None:
    root = drawn(Series({"run": "a", "rank": "0"}, ((0.0, 0.0), (50.0, 2.0), (100.0, 4.0))))
    ((first, middle, last),) = lines(root)
    assert first[1] - last[1] == pytest.approx(CHART_HEIGHT)  # 0 at the bottom, 4 at the top
    assert middle == pytest.approx(((first[0] + last[0]) / 2, (first[1] + last[1]) / 2))
    assert "a rank 0" in texts(root)  # the legend, filled from the series' labels
    assert {"0 s", "4 s"} <= set(texts(root))  # the axis' ends in the panel's unit


def test_a_value_that_is_no_number_breaks_the_line_and_a_lone_point_is_a_dot() -> None:
    points = ((0.0, 1.0), (25.0, 2.0), (50.0, math.nan), (75.0, 3.0), (100.0, 1.0))
    assert [len(line) for line in lines(drawn(Series({"run": "a"}, points)))] == [2, 2]
    lone = drawn(Series({"run": "a"}, ((0.0, 1.0), (50.0, math.nan), (100.0, 2.0))))
    assert lines(lone) == [] and len(list(lone.iter(f"{SVG}circle"))) == 2


@pytest.mark.parametrize(
    "values",
    [(-1e16, -1e16), (1.7e308, -1.7e308), (0.0, 0.0), (5e-324, 5e-324)],
    ids=["a flat line far below zero", "a span past the largest float", "zero", "tiny"],
)
def test_any_finite_values_lie_on_the_chart(values: tuple[float, float]) -> None:
    """Whatever the values, each point is a number inside the chart (none overflowed to inf or
    divided by a zero span)."""
    ((first, last),) = lines(drawn(Series({"run": "a"}, ((0.0, values[0]), (100.0, values[1])))))
    ys = (first[1], last[1])
    assert all(math.isfinite(y) for y in ys) and max(ys) - min(ys) <= CHART_HEIGHT + 0.1, ys


def test_characters_xml_cannot_hold_are_replaced_not_written() -> None:
    root = drawn(Series({"run": "a\x01b\ufffe", "rank": "<0>"}, ((0.0, 1.0), (1.0, 2.0))))
    assert "a\ufffdb\ufffd rank <0>" in texts(root)


def test_a_panel_without_data_is_named_on_its_row_s_no_data_line_not_drawn() -> None:
    nan_only = Series({"run": "a"}, ((0.0, math.nan),))
    other = Panel("Restarts", "q", Unit.COUNT, "{{run}}")
    rows = [
        ("Runs", [PanelData(STEP_TIME, ()), PanelData(other, (nan_only,))]),
        ("Queue", [PanelData(other, (Series({"run": "b"}, ((0.0, 1.0), (9.0, 2.0))),))]),
    ]
    root = ET.fromstring(picture("t", rows, 0.0, 100.0))
    assert [t for t in texts(root) if t.startswith(NO_DATA)] == [
        f"{NO_DATA}Step time per rank, Restarts"
    ]
    assert len(lines(root)) == 1 and "Step time per rank" not in texts(root)


def test_past_the_legend_s_room_series_are_counted() -> None:
    series = [Series({"run": f"r{i}", "rank": "0"}, ((0.0, float(i)),)) for i in range(6)]
    root = drawn(*series)
    assert f"and {6 - LEGEND_SHOWN} more" in texts(root)
    assert [t for t in texts(root) if t.startswith("r")] == [
        f"r{i} rank 0" for i in range(LEGEND_SHOWN)
    ]


def test_legend_and_units() -> None:
    assert legend_name(STEP_TIME, {"run": "lr-1"}) == "lr-1 rank"
    assert shown(0.93, Unit.RATIO) == "93%"
    assert shown(48e9, Unit.BYTES_PER_SECOND) == "48 GB/s"
    assert shown(512.0, Unit.BYTES) == "512 B"
    assert shown(700.0, Unit.WATTS) == "700 W"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_an_api_that_does_not_answer_is_a_refusal_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    picture_file = tmp_path / "d.svg"
    argv = ["dashboard", "--stack", "barcelona", "--prometheus", url, "--svg", str(picture_file)]
    assert main(argv) == 2
    assert f"error: {url} could not be reached" in capsys.readouterr().err
    assert not picture_file.exists()


def test_a_stack_that_collects_nothing_has_nothing_to_draw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        *("dashboard", "--stack", "gcp-a3", "--set", "monitoring.dcgm=false"),
        *("--prometheus", "http://127.0.0.1:1", "--svg", str(tmp_path / "d.svg")),
    ]
    assert main(argv) == 2
    assert "collects neither GPU metrics" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["notaurl", "ftp://host", "http://[::1", "http://host:port"])
def test_an_api_url_that_is_none_is_a_usage_error(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["dashboard", "--stack", "barcelona", "--prometheus", url, "--svg", "d.svg"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert f"argument --prometheus: '{url}': " in capsys.readouterr().err


def test_a_picture_in_no_directory_is_refused_before_any_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    picture_file = tmp_path / "absent" / "d.svg"
    argv = [
        *("dashboard", "--stack", "barcelona", "--prometheus", "http://127.0.0.1:1"),
        *("--svg", str(picture_file)),
    ]
    assert main(argv) == 2
    assert "not a file in a directory that exists" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"status": "success"}',
        b'{"status": "success", "data": {"result": null}}',
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, '
        b'"value": [1, "1"]}]}}',
        b'{"status": "success", "data": {"result": [{"metric": {}, "histograms": []}]}}',
        b'{"status": "success", "data": {"result": [{"metric": {}, "values": [[1, "abc"]]}]}}',
        b'{"status": "success", "data": {"result": [{"values": [[1, "1"]]}]}}',
        b"[" * 100000,
        b"<html>proxy error</html>",
        b'{"status": "error", "error": "bad_data"}',
    ],
    ids=[
        "a list",
        "no data",
        "a null result",
        "a vector",
        "a native histogram",
        "no number",
        "no labels",
        "nested past the recursion limit",
        "HTML",
        "a refusal",
    ],
)
def test_an_answer_that_is_no_matrix_is_a_refusal_naming_the_api(body: bytes) -> None:
    with pytest.raises(PrometheusError, match=r"^http://p (answered|refused) "):
        matrix_of("http://p", body)


def test_a_matrix_answer_is_its_series_with_labels_as_text() -> None:
    body = (
        b'{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
        b'{"run": "a", "n": 1}, "values": [[1.5, "NaN"], [2, "3"]]}]}}'
    )
    (series,) = matrix_of("http://p", body)
    assert series.labels == {"run": "a", "n": "1"}
    assert series.points[1] == (2.0, 3.0) and math.isnan(series.points[0][1])


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://exa mple.com", "without spaces"),
        ("http://a..b:9090", "label"),
        ("http://user:secret@host", "credentials"),
        ("http://host:9090?x=1", "ends with its path"),
        ("http://host/sin\u20acgle", "in ASCII"),
    ],
)
def test_an_api_url_the_request_could_not_use_is_a_usage_error_that_shows_no_secret(
    url: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["dashboard", "--stack", "barcelona", "--prometheus", url, "--svg", "d.svg"])
    err = capsys.readouterr().err
    assert said in err and "secret" not in err.replace("credentials", "")


def test_a_token_no_header_carries_is_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROMETHEUS_TOKEN", "tok\n")
    url = f"http://127.0.0.1:{closed_port()}"
    argv = ["dashboard", "--stack", "barcelona", "--prometheus", url, "--svg", str(tmp_path / "d")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "$PROMETHEUS_TOKEN holds a line break" in err and "could not be reached" not in err
