"""The Pulumi project a command renders, found as the Pulumi CLI finds it: the first directory
holding a Pulumi.yaml, from the working directory up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpu_cluster.offline.stack_files import PROJECT_DIR, read_project_file, stack_names


class ProjectError(Exception):
    """No usable Pulumi project where one was looked for; the message names the place."""


@dataclass(frozen=True)
class Project:
    directory: Path  # Pulumi.yaml and the stack files, Pulumi.<stack>.yaml
    name: str  # Pulumi.yaml's `name:`, the namespace of the program's own config keys
    program: Path  # the directory whose __main__.py the engine runs (Pulumi.yaml's `main:`)

    def stacks(self) -> list[str]:
        return stack_names(self.directory)


def read_project(directory: Path = PROJECT_DIR) -> Project:
    """The project of `directory`'s Pulumi.yaml. Raises ProjectError where there is none or its
    program cannot be found, ConfigError for a Pulumi.yaml that cannot be read."""
    if not (directory / "Pulumi.yaml").is_file():
        raise ProjectError(f"{directory}: no Pulumi.yaml here")
    found = read_project_file(directory)
    program = directory / found.main if found.main else directory
    # Pulumi's `main:` may also name a file for some runtimes; the offline engine runs a
    # directory's __main__.py, as the Python runtime does for a directory.
    if not (program / "__main__.py").is_file():
        where = f"`main: {found.main}` in {directory}" if found.main else str(directory)
        raise ProjectError(f"{where}: no __main__.py, the program the render runs")
    return Project(directory.resolve(), found.name, program.resolve())


def find_project(start: Path) -> Project:
    """The project of the first Pulumi.yaml in `start` or a directory above it."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if (directory / "Pulumi.yaml").is_file():
            return read_project(directory)
    raise ProjectError(
        f"no Pulumi.yaml in {start} or any directory above it: run in a Pulumi project, or "
        "give --project-dir"
    )
