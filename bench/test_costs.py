"""What the offline tests cost, file by file: wall and CPU seconds, child processes included.

    python bench/test_costs.py [-n 2] [--top 40] [--out FILE] [-- PYTEST ARGS]

Runs `python -m pytest -q -m "not real"` (or the selection given after `--`) with the plugin
below in every pytest process (pytest-xdist's workers too). For each test it records the wall
time of its setup, call and teardown (`time.perf_counter`), the CPU time of the pytest process
(`time.process_time`) and of the child processes the test started and waited for (CLI runs, the
installed wheel, checkov, torch workers, pod scripts: `resource.getrusage(RUSAGE_CHILDREN)`),
and per process what its start and collection cost. Then prints a markdown table per test
file, the costliest first, and the slowest tests (bench/README.md). A measurement, not a test:
nothing is asserted; the exit code is pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent
OUT_ENV = "GPU_CLUSTER_TEST_COSTS"  # the directory the plugin writes its records to


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class _Recorder:
    """The plugin: one JSON line per test (and one for collection) in a file per process."""

    def __init__(self, out_dir: Path) -> None:
        self._out = (out_dir / f"{os.getpid()}.jsonl").open("a", encoding="utf-8")

    def _write(self, record: dict[str, Any]) -> None:
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()

    @staticmethod
    def _now() -> tuple[float, float, float]:
        return time.perf_counter(), time.process_time(), _children_cpu()

    def pytest_collection_finish(self) -> None:
        # The process's CPU so far: interpreter start, conftest and test-module imports,
        # collection (process_time counts from the process's start).
        self._write({"collection": True, "cpu": time.process_time(), "children": _children_cpu()})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        start = self._now()
        yield
        wall, cpu, children = (b - a for a, b in zip(start, self._now(), strict=True))
        self._write({"test": item.nodeid, "wall": wall, "cpu": cpu, "children": children})


def pytest_configure(config: pytest.Config) -> None:
    out_dir = os.environ.get(OUT_ENV)
    if out_dir:
        config.pluginmanager.register(_Recorder(Path(out_dir)), "gpu-cluster-test-costs")


def _records(out_dir: Path) -> Iterable[dict[str, Any]]:
    for path in sorted(out_dir.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            yield json.loads(line)


def summarize(records: Iterable[dict[str, Any]], top: int) -> tuple[str, dict[str, Any]]:
    """The markdown tables and their data: per file (costliest first) and the slowest tests."""
    per_file: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    tests: list[dict[str, Any]] = []
    collection = {"processes": 0.0, "cpu": 0.0}
    for record in records:
        if record.get("collection"):
            collection["processes"] += 1
            collection["cpu"] += record["cpu"] + record["children"]
            continue
        tests.append(record)
        totals = per_file[record["test"].split("::", 1)[0]]
        totals["tests"] += 1
        for key in ("wall", "cpu", "children"):
            totals[key] += record[key]
    all_cpu = sum(t["cpu"] + t["children"] for t in per_file.values()) or 1.0
    rows = sorted(per_file.items(), key=lambda kv: -(kv[1]["cpu"] + kv[1]["children"]))
    lines = [
        "| file | tests | wall s | CPU s | of it, child processes | share of CPU |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, t in rows[:top]:
        cpu = t["cpu"] + t["children"]
        lines.append(
            f"| {name} | {int(t['tests'])} | {t['wall']:.1f} | {cpu:.1f} | {t['children']:.1f} "
            f"| {100 * cpu / all_cpu:.1f}% |"
        )
    lines.append(
        f"| all {len(per_file)} files | {len(tests)} | "
        f"{sum(t['wall'] for t in per_file.values()):.1f} | {all_cpu:.1f} | "
        f"{sum(t['children'] for t in per_file.values()):.1f} | 100% |"
    )
    lines.append("")
    lines.append(
        f"Start and collection (imports included): {int(collection['processes'])} pytest "
        f"process(es), {collection['cpu']:.1f} CPU s in all."
    )
    lines.append("")
    lines.append("| slowest tests | wall s | CPU s |")
    lines.append("|---|---:|---:|")
    for t in sorted(tests, key=lambda t: -t["wall"])[:top]:
        lines.append(f"| {t['test']} | {t['wall']:.1f} | {t['cpu'] + t['children']:.1f} |")
    data = {"files": dict(per_file), "collection": collection, "tests": len(tests)}
    return "\n".join(lines), data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--workers", default="2", help="pytest-xdist workers (0: none)")
    parser.add_argument("--top", type=int, default=40, help="rows per table")
    parser.add_argument("--out", type=Path, default=PROJECT_DIR / "bench/results/test-costs.json")
    parser.add_argument("pytest_args", nargs="*", help='after --; default: -m "not real"')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="test-costs-") as out_dir:
        env = dict(os.environ, **{OUT_ENV: out_dir})
        # The plugin is this file, importable as `test_costs` from bench/.
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PROJECT_DIR / "bench"), *filter(None, [env.get("PYTHONPATH")])]
        )
        selection = args.pytest_args or ["-m", "not real"]
        workers = ["-n", args.workers] if args.workers != "0" else []
        started = time.perf_counter()
        pytest_run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "test_costs", *workers, *selection],
            cwd=PROJECT_DIR,
            env=env,
            check=False,
        )
        elapsed = time.perf_counter() - started
        table, data = summarize(_records(Path(out_dir)), args.top)
    print(f"\npytest exit {pytest_run.returncode}; {elapsed:.0f} s wall in all\n")
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**data, "wall": elapsed}, indent=1) + "\n", encoding="utf-8")
    return pytest_run.returncode


if __name__ == "__main__":
    sys.exit(main())
