"""`python -m tools.change_summary BASE_DIR HEAD_DIR`: the change summary of
gpu_cluster.offline.change_summary (also `gpu-cluster summary`), by the name the PR workflow
(.github/workflows/preview.yml) calls it."""

from __future__ import annotations

import argparse
import sys

from gpu_cluster.offline.change_summary import add_arguments, write_summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.change_summary",
        description="Markdown summary of the desired-state change between two renders.",
    )
    add_arguments(parser)
    return write_summary(parser, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
