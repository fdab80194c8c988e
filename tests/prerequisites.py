"""What a test does when this machine lacks something it needs (a tool, a kernel feature): on a
developer's machine it skips, saying what is missing; in CI (CI=true) it fails, since a skip there
would pass unseen and the check would never run."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: a missing prerequisite fails the test)")
    pytest.skip(reason)
