"""Running the user's tools (pulumi, oc, kubectl, gcloud) from the offline commands `rights
--check` and `doctor`: each run bounded by a timeout, with no terminal to prompt on."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class NoAnswerError(Exception):
    """A tool that is not on PATH (`missing`) or gave no answer within its timeout."""

    def __init__(self, message: str, missing: bool) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class Answer:
    status: int
    out: str
    err: str

    def first_error_line(self) -> str:
        """What the tool said went wrong, in one line (its stderr's first, or its status)."""
        lines = (self.err or self.out).strip().splitlines()
        return lines[0] if lines else f"exit {self.status}"


def run_tool(
    argv: tuple[str, ...],
    timeout_s: int,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Answer:
    """`argv` run to its end or for `timeout_s` seconds; stdin is empty, so a tool that would
    prompt (a login) reads end of file and fails instead of waiting. `env`: added variables."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env={**os.environ, **env} if env else None,
        )
    except FileNotFoundError:
        raise NoAnswerError(f"{argv[0]} is not on PATH", missing=True) from None
    except subprocess.TimeoutExpired:
        silent = f"`{shlex.join(argv)}` gave no answer in {timeout_s} s"
        raise NoAnswerError(silent, missing=False) from None
    return Answer(done.returncode, done.stdout, done.stderr)
