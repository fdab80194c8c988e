"""What tools/k8s_force_new.py and tools/provider_force_new.py share: building their Go reader
(go/ast over the provider's source) and writing, or checking, the vendor file they derive."""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def go_reader(name: str) -> Iterator[Path]:
    """tools/<name>/main.go built into a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        tool = Path(tmp) / name
        subprocess.run(
            ["go", "build", "-o", str(tool), str(ROOT / "tools" / name / "main.go")], check=True
        )
        yield tool


def run_main(
    description: str, source_help: str, target: Path, extract: Callable[[Path], dict[str, Any]]
) -> int:
    """`SOURCE [--check]`: rewrite `target` from the source, or exit 1 if it differs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("source", type=Path, help=source_help)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs")
    args = parser.parse_args()
    text = json.dumps(extract(args.source), indent=1, sort_keys=True) + "\n"
    if args.check:
        if target.read_text() != text:
            print(f"{target.relative_to(ROOT)} differs from the provider source", file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    return 0
