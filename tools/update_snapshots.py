"""Refresh the golden snapshots in tests/snapshots/ from the current program.

    python -m tools.update_snapshots

Renders every stack (`Pulumi.<stack>.yaml`) as of the tests' date (tests/as_of.py, what
tests/test_snapshots.py compares at) first and writes nothing if any stack fails; then
rewrites tests/snapshots/<stack>/ for each and deletes the directories of stacks that no longer
exist. Review the result with `git diff tests/snapshots` like any other change: it is what the
code change does to every stack.
"""

from __future__ import annotations

import shutil
import sys

from gpu_cluster.config.messages import ConfigError
from gpu_cluster.offline.stack_files import PROJECT_DIR
from tests.as_of import AS_OF
from tools.render_all import render_stacks, write

SNAPSHOTS = PROJECT_DIR / "tests" / "snapshots"


def main() -> int:
    try:
        renders = render_stacks(AS_OF)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}; no snapshot was written", file=sys.stderr)
        return 2
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    for old in sorted(SNAPSHOTS.iterdir()):
        if old.is_dir() and old.name not in renders:
            shutil.rmtree(old)
            print(f"removed {old.relative_to(PROJECT_DIR)}/ (no Pulumi.{old.name}.yaml)")
    for stack, files in renders.items():
        target = SNAPSHOTS / stack
        for stale in target.glob("*") if target.is_dir() else []:
            if stale.is_file() and stale.name not in files:
                stale.unlink()
        write(target, files)
    print(f"wrote {SNAPSHOTS.relative_to(PROJECT_DIR)}/{{{','.join(renders)}}}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
