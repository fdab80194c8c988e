"""Run the real render CLI (`python -m gpu_cluster.offline`) as a user would, in this
checkout or in a copy of the program with stack files a test writes: its entry point in the
test's own process (tests/test_cli.py runs the command as a process)."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.offline.cli import CRASHED, offline_main
from tests.as_of import AS_OF
from tests.prerequisites import unavailable

ROOT = Path(__file__).resolve().parent.parent
# What the program needs to run: its code, the pod scripts it ships and the project file.
PROGRAM = ("gpu_cluster", "scripts", "__main__.py", "Pulumi.yaml")


def cli(
    *args: str, cwd: Path = ROOT, prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """The render CLI (`python -m gpu_cluster.offline`) with `args`, as of the tests' date
    (first, so that no option of `args` can take it for its value). In this process, as its
    entry point runs it (`in_process`); `prefix` runs it in a process of its own under another
    command (`unshare ...`)."""
    argv = ["--as-of", str(AS_OF.day), *args]
    if not prefix:
        return in_process(offline_main, argv, cwd)
    return subprocess.run(
        [*prefix, sys.executable, "-m", "gpu_cluster.offline", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def in_process(
    entry: Callable[[list[str]], int], argv: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`entry(argv)` from `cwd` as `run_cli` runs it in a process of its own, without the
    interpreter's start (about a second of imports a call): its output captured, an argparse
    exit taken as its code, a crash as CRASHED with its traceback on stderr. The process
    itself (run_cli's exit, signals, the installed command) is tested in tests/test_cli.py."""
    stdout, stderr = io.StringIO(), io.StringIO()

    def run() -> int:
        try:
            return entry(argv)
        except SystemExit as exc:  # as the interpreter ends on it: a text is said, and is 1
            if exc.code is None or isinstance(exc.code, int):
                return exc.code or 0
            print(exc.code, file=sys.stderr)
            return 1
        except Exception:
            traceback.print_exc()
            return CRASHED

    path = list(sys.path)  # the program's run adds its project directory
    with (
        contextlib.chdir(cwd),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        try:
            code = run()
        finally:
            sys.path[:] = path
    return subprocess.CompletedProcess(
        ["gpu_cluster.offline", *argv], code, stdout.getvalue(), stderr.getvalue()
    )


def program_copy(into: Path, stacks: dict[str, str]) -> Path:
    """A copy of the program in `into` with `Pulumi.<stack>.yaml` files of the given text."""
    for name in PROGRAM:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, into / name)
    for stack, text in stacks.items():
        (into / f"Pulumi.{stack}.yaml").write_text(text)
    return into


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` (contents for files), to show that nothing was written."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
        if "__pycache__" not in p.parts
    }


def one_error(stderr: str) -> str:
    """The single `error:` message of a refused run (no traceback), as one string."""
    assert "Traceback" not in stderr, stderr
    assert stderr.startswith("error: "), stderr
    assert stderr.count("error:") == 1, stderr
    return stderr


def refused_stack_file(tmp_path: Path, text: str) -> str:
    """Render a stack file of `text` through the CLI in a copy of the program: it must be
    refused (exit 2, one message, nothing written); returns the message."""
    project = program_copy(tmp_path / "project", {"given": text})
    before = tree(tmp_path)
    result = cli("--stack", "given", "--out", str(tmp_path / "out"), cwd=project)
    assert result.returncode == 2
    assert tree(tmp_path) == before
    return one_error(result.stderr)


def by_case(argnames: str, table: Sequence[tuple[Any, ...]]) -> pytest.MarkDecorator:
    """Parametrize over (case id, *values) rows."""
    return pytest.mark.parametrize(
        argnames, [row[1:] for row in table], ids=[row[0] for row in table]
    )


@functools.cache
def _unshare(*flags: str) -> tuple[str, ...] | None:
    """`unshare FLAGS` as a command prefix, None where this machine does not allow it."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, *flags, "true"], capture_output=True, check=False)
    return (unshare, *flags) if probe.returncode == 0 else None


def as_a_user() -> tuple[str, ...]:
    """A command prefix under which file modes bind the command, as they bind any user: none for
    a user; for root, a user namespace of its own (`unshare --user`, no ID mapped), where the
    kernel checks root's own files against their owner bits (no capability applies to files
    whose owner is not mapped into the namespace). Skips the test where neither is possible."""
    if os.geteuid() != 0:
        return ()
    prefix = _unshare("--user")
    if prefix is None:
        unavailable("running as root, and unshare --user is not allowed: modes do not bind root")
    return prefix


def as_root_of_a_mount_namespace() -> tuple[str, ...]:
    """A command prefix that may mount file systems (a user and mount namespace of its own, as
    its root; the mounts go with it); skips the test where the machine does not allow one."""
    prefix = _unshare("--user", "--map-root-user", "--mount")
    if prefix is None:
        unavailable("unshare --user --map-root-user --mount is not allowed here")
    return prefix


def children(pid: int | str) -> list[str]:
    """The PIDs (as this namespace sees them) of `pid`'s children, once it has one."""
    while True:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if found:
            return found
        time.sleep(0.05)


def descendants(pid: int | str) -> list[str]:
    """Every process below `pid` now (the children of each of its threads, theirs, and on)."""
    found: list[str] = []
    for listed in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):  # a thread or the process ended meanwhile
            for child in listed.read_text().split():
                found += [child, *descendants(child)]
    return found


def running(pid: int | str) -> bool:
    """`pid` is there and no zombie (ended, not yet reaped by its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def command_line(pid: int | str) -> list[str]:
    """`pid`'s arguments; [] once it has ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def as_pid_1() -> tuple[str, ...]:
    """A command prefix under which the command is PID 1 of a PID namespace of its own, as in
    its container (a user namespace too, so no privilege is needed), with that namespace's own
    /proc, killed (SIGKILL) when the prefix's process dies; skips the test where the machine
    does not allow one."""
    prefix = _unshare(
        "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount-proc"
    )
    if prefix is None:
        unavailable("unshare --user --map-root-user --pid is not allowed here")
    return prefix
