"""Render every shipped stack offline into OUT/<stack>/ (the files `python -m gpu_cluster.offline`
writes).

    python -m tools.render_all OUT

Stacks are the `Pulumi.<stack>.yaml` files beside `Pulumi.yaml`. A stack whose config is
rejected is reported on stderr and skipped; the exit code is then 2 (0 when all rendered).
Also runs as a file against another checkout of the program, e.g. the base of a pull request:
`cd BASE && PYTHONPATH=. python HEAD/tools/render_all.py OUT`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

try:
    from gpu_cluster.offline.render import render
    from gpu_cluster.offline.stack_files import PROJECT_DIR
except ModuleNotFoundError:  # a base checkout from before the gpu_cluster package (issue 15)
    from components.offline import PROJECT_DIR  # type: ignore[import-not-found,no-redef]
    from components.render import render  # type: ignore[import-not-found,no-redef]

if TYPE_CHECKING:  # a name only: a base checkout may have no gpu_cluster.config.dates
    from gpu_cluster.config.dates import AsOf


def stacks(project_dir: Path = PROJECT_DIR) -> list[str]:
    """Every stack with a Pulumi.<stack>.yaml, sorted."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))


def render_stacks(as_of: AsOf) -> dict[str, dict[str, str]]:
    """Stack -> file name -> content, for every stack checked as of `as_of` (raises on the
    first bad one)."""
    return {stack: render(stack, as_of=as_of) for stack in stacks()}


def write(target: Path, files: dict[str, str]) -> None:
    # Not taken from gpu_cluster.offline.render (which writes --out the same way): this file
    # also runs against a base checkout whose components may predate any shared helper.
    target.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (target / name).write_text(content)


def render_all(out: Path) -> list[str]:
    """Render every stack into out/<stack>/; returns the stacks that failed (reported)."""
    failed = []
    for stack in stacks():
        try:
            files = render(stack)
        except Exception as exc:  # a bad stack must not hide the others' renders
            print(f"error: stack {stack!r}: {exc}", file=sys.stderr)
            failed.append(stack)
            continue
        write(out / stack, files)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.render_all",
        description="Render every stack offline into OUT/<stack>/.",
    )
    parser.add_argument("out", type=Path, help="directory to write one subdirectory per stack to")
    args = parser.parse_args(argv)
    try:
        failed = render_all(args.out)
    except OSError as exc:  # OUT blocked by a file, or not creatable
        print(
            f"error: {args.out}: cannot write it ({exc.strerror}: {exc.filename})", file=sys.stderr
        )
        return 2
    rendered = [s for s in stacks() if s not in failed]
    print(f"rendered {', '.join(rendered) or 'no stack'} to {args.out}/", file=sys.stderr)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
