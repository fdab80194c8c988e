"""Render every shipped stack offline into OUT/<stack>/ (the files `components.render` writes).

python -m tools.render_all OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

from components.offline import PROJECT_DIR
from components.render import render


def stacks(project_dir: Path = PROJECT_DIR) -> list[str]:
    """Every stack with a Pulumi.<stack>.yaml."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))


def render_all(out: Path) -> None:
    for stack in stacks():
        target = out / stack
        target.mkdir(parents=True, exist_ok=True)
        for name, content in render(stack).items():
            (target / name).write_text(content)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    render_all(Path(sys.argv[1]))
