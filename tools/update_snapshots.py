"""Refresh the golden snapshots in tests/snapshots/ from the current program.

    python -m tools.update_snapshots

Review the resulting `git diff tests/snapshots` like any other change: it is what the code
change does to every stack.
"""

from __future__ import annotations

import shutil

from components.offline import PROJECT_DIR
from tools.render_all import render_all, stacks

SNAPSHOTS = PROJECT_DIR / "tests" / "snapshots"


def main() -> None:
    for old in SNAPSHOTS.iterdir() if SNAPSHOTS.exists() else []:
        if old.is_dir() and old.name not in stacks():
            shutil.rmtree(old)  # the stack no longer exists
    render_all(SNAPSHOTS)
    print(f"snapshots of {', '.join(stacks())} written to {SNAPSHOTS}")


if __name__ == "__main__":
    main()
