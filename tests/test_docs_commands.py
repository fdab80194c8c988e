"""Every command in the docs is run, or checked, here.

Each fenced shell block (```bash, ```sh, ```shell, ```console) of README.md and docs/*.md is
split into simple commands (`a && b; c | d` is four). Each one is either

- RUN: it works offline in a few seconds, so it runs, in document order, in a copy of the program
  (one per document, so `cp` and `--out` write there, not into the checkout), and must exit 0; or
- CHECKED: it needs what this machine does not have (the Pulumi CLI and a backend, a cluster, a
  cloud account, the network) or would run this test itself. Its executable must be one of
  EXTERNAL below, which says why, and what it names must exist: stacks, config keys, stack
  outputs, files, subcommands.

A command that is neither fails the test: classify it in RUN_MODULES, RUN_TOOLS or EXTERNAL. Every
block must also parse (`bash -n`).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cli import PROGRAM
from tests.conftest import ROOT, STACKS, schema_key_paths

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```",
    flags=re.MULTILINE | re.DOTALL,
)
OPERATORS = {"&&", "||", ";", "|", "&"}
ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z_]\w*)=(?P<value>.*)")

# `python -m <module>` commands that run offline here (each well under a minute), with what
# the copy of the program must hold for them.
RUN_MODULES = {
    "gpu_cluster": "the gpu-cluster command (docs/cli.md): render, diff, summary, new, --help",
    "gpu_cluster.offline": "the offline render: renders a stack with the mock engine",
    "tools.config_reference": "writes docs/config-reference.md from the schema",
    "tools.update_snapshots": "renders every stack into tests/snapshots/",
}
# Plain executables that run here (file operations inside the copy).
RUN_TOOLS = {"cp": "copies a stack file inside the copy of the program"}
# What the copy of the program holds: the program, its stack files and what the commands above
# read or write.
COPIED = (
    *PROGRAM,
    *("tools", "docs", "examples", "requirements.txt", "tests/snapshots"),
    # tools/update_snapshots renders as of the tests' pinned date.
    *("tests/__init__.py", "tests/as_of.py"),
)


@dataclass
class Command:
    """One simple command of a block, in the document `doc` (relative path). `assigns`: the
    variable its output is assigned to (`NAME="$(command)"`); `previous`: the command before it
    on its line, `operator` what joins them (`&&`, `;`, ...)."""

    doc: str
    argv: list[str]
    block: str
    assigns: str | None = None
    previous: Command | None = None
    operator: str = ""

    def __str__(self) -> str:
        return f"{self.doc}: {shlex.join(self.argv)}"


@dataclass
class Context:
    """What earlier commands of the same document made: stacks (`cp`, `gpu_cluster new`) and
    virtualenvs."""

    stacks: set[str] = field(default_factory=lambda: set(STACKS))
    venvs: set[str] = field(default_factory=set)


def shell_blocks(doc: Path) -> Iterator[str]:
    for m in FENCE.finditer(doc.read_text(encoding="utf-8")):
        if m.group("lang") not in SHELL_LANGS:
            continue
        indent = len(m.group("indent"))
        lines = [line[indent:] for line in m.group("body").splitlines()]
        if m.group("lang") == "console":  # only the prompts' lines are commands
            lines = [line[2:] for line in lines if line.startswith("$ ")]
        yield "\n".join(lines) + "\n"


def line_commands(doc: str, line: str, block: str) -> Iterator[Command]:
    """The simple commands of one line. A `VAR=value` before a command is skipped; an
    assignment of a command's output, `NAME="$(command)"`, is that command (assigns NAME), and
    so is one before a command (`NAME="$(a)" b`: a, then b with NAME in its environment)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    previous: Command | None = None
    operator = ""
    argv: list[str] = []
    assigns: str | None = None
    for token in [*lexer, ";"]:  # the line's end ends its last command
        if token in OPERATORS:
            previous = Command(doc, argv, block, assigns, previous, operator) if argv else None
            if previous is not None:
                yield previous
            argv, assigns, operator = [], None, token
        elif assignment := ASSIGNMENT.fullmatch(token) if not argv or assigns else None:
            if output_of := re.fullmatch(r"\$\((.+)\)", assignment.group("value")):
                if argv:
                    previous = Command(doc, argv, block, assigns, previous, operator)
                    yield previous
                    operator = ""
                argv, assigns = shlex.split(output_of.group(1)), assignment.group("name")
        elif assigns:  # the command the assignment is the environment of
            previous = Command(doc, argv, block, assigns, previous, operator)
            yield previous
            argv, assigns, operator = [token], None, ""
        else:
            argv.append(token)


def simple_commands(doc: Path) -> Iterator[Command]:
    name = str(doc.relative_to(ROOT))
    for block in shell_blocks(doc):
        for line in block.replace("\\\n", " ").splitlines():
            yield from line_commands(name, line, block)


def all_commands() -> list[Command]:
    return [c for doc in DOCS for c in simple_commands(doc)]


def ids(commands: list[Command]) -> list[str]:
    return [str(c)[:90] for c in commands]


# --- the static checks of commands that cannot run here ---------------------------------------


def stack_outputs() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "tests" / "snapshots").glob("*/outputs.json"):
        found |= set(json.loads(path.read_text(encoding="utf-8")))
    return found


def config_key(path: str) -> str:
    """`gcp.authorizedNetworks[0].cidrBlock` as the schema's key paths write it."""
    return re.sub(r"\[\d+\]", "[]", path)


def check_pulumi(c: Command, ctx: Context) -> None:
    args = [a for a in c.argv[1:] if not a.startswith("-")]
    assert args, c
    assert args[0] in {"version", "login", "stack", "preview", "up", "config", "import"}, c
    if args[0] == "stack" and args[1] in {"init", "select"}:
        assert args[2] in ctx.stacks, f"{c}: no Pulumi.{args[2]}.yaml"
    if args[0] == "stack" and args[1] == "output":
        assert args[2] in stack_outputs(), f"{c}: no stack exports {args[2]}"
    if args[0] == "config" and "--path" in c.argv:
        key = c.argv[c.argv.index("--path") + 1]
        assert config_key(key) in schema_key_paths("[]"), f"{c}: {key} is not a config key"
    if "--policy-pack" in c.argv:
        assert (ROOT / c.argv[c.argv.index("--policy-pack") + 1] / "PulumiPolicy.yaml").exists()


def check_kube(c: Command, ctx: Context) -> None:
    verbs = {"get", "delete", "exec", "apply", "rsync", "describe", "logs", "auth", "whoami"}
    assert c.argv[1] in verbs, f"{c}: a {c.argv[0]} verb the docs do not use yet"
    if "-n" in c.argv:
        assert re.fullmatch(r"[a-z0-9-]+", c.argv[c.argv.index("-n") + 1]), c


def check_gcloud(c: Command, ctx: Context) -> None:
    groups = {("services", "enable"), ("container", "clusters"), ("auth",), ("compute",)}
    assert tuple(c.argv[1:3]) in groups or (c.argv[1],) in groups, c


# Repositories the docs clone, each at the commit they pin (its tools are run from source).
CLONED = {"https://github.com/ai-on-gke/tools": "dd191890bc689477123e618ac09f0100527c64f4"}


def check_git(c: Command, ctx: Context) -> None:
    if c.argv[1] == "clone":
        assert c.argv[2] in CLONED, f"{c}: clone only what CLONED pins"
        return
    if c.argv[1] == "-C":
        assert c.argv[3] == "checkout" and c.argv[4] in CLONED.values(), c
        return
    assert c.argv[1] == "diff", c
    for path in (a for a in c.argv[2:] if not a.startswith("-")):
        assert (ROOT / path).exists(), f"{c}: {path} does not exist"


def check_go(c: Command, ctx: Context) -> None:
    """The disk image builder, run from the pinned checkout with the flags its cli/main.go
    defines (at CLONED's commit)."""
    assert c.argv[1] == "-C" and c.argv[3:5] == ["run", "./cli"], c
    flags = {a.split("=", 1)[0] for a in c.argv[5:]}
    known = {
        "--project-name", "--image-name", "--zone", "--gcs-path", "--disk-size-gb",
        "--container-image", "--image-pull-auth", "--timeout", "--network", "--subnet",
    }  # fmt: skip
    assert flags <= known, f"{c}: {flags - known}"


def check_pip(c: Command, ctx: Context) -> None:
    assert c.argv[1] == "install" and c.argv[2] == "-r", c
    assert (ROOT / c.argv[3]).is_file(), f"{c}: no {c.argv[3]}"
    executable = c.argv[0]
    if "/" in executable:  # a virtualenv's pip: made by an earlier `python -m venv`
        assert executable.split("/bin/")[0] in ctx.venvs, f"{c}: no virtualenv made before"


def check_source(c: Command, ctx: Context) -> None:
    assert c.argv[1].endswith("/bin/activate"), c
    assert c.argv[1].split("/bin/")[0] in ctx.venvs, f"{c}: no virtualenv made before"


def check_bash(c: Command, ctx: Context) -> None:
    script = ROOT / c.argv[1]
    assert script.is_file(), f"{c}: no {c.argv[1]}"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0, c


# How the docs run a command the stack exports.
READ_THEN_RUN = 'cmd="$(pulumi stack output X)" && eval "$cmd"'


def check_eval(c: Command, ctx: Context) -> None:
    """eval runs a command the stack exports once it is read (the read itself is checked as a
    pulumi command): `eval "$(pulumi stack output X)"` evals nothing when pulumi fails (not
    installed, no stack selected, not logged in), and eval of nothing exits 0, as a passed
    check does."""
    read = c.previous
    assert (
        read is not None
        and read.argv[:3] == ["pulumi", "stack", "output"]
        and read.assigns is not None
        and c.operator == "&&"
        and c.argv[1:] == [f"${read.assigns}"]
    ), f"{c}: eval only what a stack exports, and only once read: {READ_THEN_RUN}"


def check_nothing(c: Command, ctx: Context) -> None:
    pass


# Executables that cannot run here, each with why and its static check.
EXTERNAL: dict[str, tuple[str, Callable[[Command, Context], None]]] = {
    "pulumi": ("needs the Pulumi CLI, a state backend and the cluster or cloud", check_pulumi),
    "oc": ("needs an OpenShift cluster (the migration's run on the real tier)", check_kube),
    "kubectl": ("needs a Kubernetes cluster", check_kube),
    "gcloud": ("needs the gcloud CLI and a Google Cloud project", check_gcloud),
    "git": (
        "reviews the checkout's changes, or clones a pinned tool: the copy is not a repository",
        check_git,
    ),
    "go": ("builds a disk image in a Google Cloud project (network, a cloud account)", check_go),
    "pip": ("installs from PyPI: network, minutes", check_pip),
    "policy/venv/bin/pip": ("installs from PyPI: network, minutes", check_pip),
    ".": ("activates the virtualenv an earlier command made", check_source),
    "bash": ("`bash .ci/run` is CI: it runs this test (recursion), 11-26 min", check_bash),
    "eval": ("runs a command the deployed stack exports (a cluster)", check_eval),
    "echo": ("prints; nothing to check", check_nothing),
}
# `python -m <module>` commands that cannot run here.
EXTERNAL_MODULES: dict[str, str] = {
    "venv": "makes a virtualenv that the following pip command fills from PyPI (network)",
    "pytest": "runs the test suite, which runs this test (recursion, minutes)",
}


def is_python(word: str) -> bool:
    return word in {"python", "python3"}


def module_of(c: Command) -> str | None:
    if is_python(c.argv[0]) and len(c.argv) > 2 and c.argv[1] == "-m":
        return c.argv[2]
    return None


# `python -m gpu_cluster` subcommands that ask this machine's tools, cluster and cloud: here
# (no Pulumi CLI, no cluster) they exit 1, so they are checked, not run.
CHECKED_SUBCOMMANDS = {
    "doctor": "checks the Pulumi CLI, its login, the cluster and the cloud",
    "run": "submits, lists, reads and stops runs on the stack's cluster",
    "dashboard": "reads the stack's Prometheus (OpenShift's Thanos Querier, Google's API)",
}


def checked_subcommand(c: Command) -> bool:
    return module_of(c) == "gpu_cluster" and c.argv[3:4] != [] and c.argv[3] in CHECKED_SUBCOMMANDS


def runs_here(c: Command) -> bool:
    if checked_subcommand(c):
        return False
    return module_of(c) in RUN_MODULES or c.argv[0] in RUN_TOOLS


def classify(c: Command, ctx: Context) -> str:
    """'run' or 'checked' (after its static check); fails for an unclassified command."""
    module = module_of(c)
    if runs_here(c):
        if c.argv[0] == "cp" and c.argv[-1].startswith("Pulumi."):
            ctx.stacks.add(c.argv[-1][len("Pulumi.") : -len(".yaml")])
        if module == "gpu_cluster" and c.argv[3:4] == ["new"]:
            ctx.stacks.add(c.argv[c.argv.index("--stack") + 1])
        return "run"
    if module == "venv":
        ctx.venvs.add(c.argv[3])
    if module == "pytest":
        for path in (a for a in c.argv[3:] if a.startswith("tests")):
            assert (ROOT / path.split("::")[0]).exists(), f"{c}: no {path}"
    if module in EXTERNAL_MODULES:
        return "checked"
    if checked_subcommand(c):
        stack = c.argv[c.argv.index("--stack") + 1]
        assert stack in ctx.stacks, f"{c}: no Pulumi.{stack}.yaml"
        return "checked"
    assert module is None, (
        f"{c}: python -m {module} is neither run (RUN_MODULES) nor checked (EXTERNAL_MODULES)"
    )
    assert c.argv[0] in EXTERNAL, (
        f"{c}: {c.argv[0]} is neither run here (RUN_TOOLS) nor allow-listed (EXTERNAL) in "
        "tests/test_docs_commands.py: classify it, with the reason"
    )
    EXTERNAL[c.argv[0]][1](c, ctx)
    return "checked"


# --- tests ----------------------------------------------------------------------------------


def test_the_docs_have_commands_to_check() -> None:
    found = all_commands()
    assert any(module_of(c) == "gpu_cluster.offline" for c in found)
    assert any(c.argv[0] == "pulumi" for c in found)


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_shell_block_parses(doc: Path) -> None:
    for block in shell_blocks(doc):
        result = subprocess.run(
            ["bash", "-n"], input=block, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"{doc.name}: bash -n refuses\n{block}\n{result.stderr}"


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_command_is_run_or_checked(doc: Path) -> None:
    ctx = Context()
    for command in simple_commands(doc):
        classify(command, ctx)


def test_an_unclassified_command_fails_the_check() -> None:
    ctx = Context()
    with pytest.raises(AssertionError, match="neither run here"):
        classify(Command("x.md", ["terraform", "apply"], ""), ctx)
    with pytest.raises(AssertionError, match="neither run"):
        classify(Command("x.md", ["python", "-m", "tools.nothing"], ""), ctx)
    with pytest.raises(AssertionError, match=r"no Pulumi\.nowhere\.yaml"):
        classify(Command("x.md", ["pulumi", "stack", "init", "nowhere"], ""), ctx)
    with pytest.raises(AssertionError, match="is not a config key"):
        classify(Command("x.md", ["pulumi", "config", "set", "--path", "gcp.nope", "1"], ""), ctx)
    read, _ = line_commands("x.md", 'cmd="$(pulumi stack output nothing)" && eval "$cmd"', "")
    with pytest.raises(AssertionError, match="no stack exports"):
        classify(read, ctx)


# An exported command run so that a failed read runs nothing and exits 0: no check may pass
# by default.
PASSES_UNREAD = [
    'eval "$(pulumi stack output verifyCommand)"',
    'cmd="$(pulumi stack output verifyCommand)"; eval "$cmd"',
    'cmd="$(pulumi stack output verifyCommand)" || eval "$cmd"',
]
RUN_ONCE_READ = 'cmd="$(pulumi stack output verifyCommand)" && eval "$cmd"'


def exit_code(line: str, pulumi: str, tmp_path: Path) -> int:
    """`line` run by bash with `pulumi` the given script."""
    (tmp_path / "pulumi").write_text(f"#!/bin/sh\n{pulumi}\n")
    (tmp_path / "pulumi").chmod(0o755)
    path = f"{tmp_path}:/usr/bin:/bin"
    return subprocess.run(["bash", "-c", line], env={"PATH": path}, check=False).returncode


@pytest.mark.parametrize("line", PASSES_UNREAD)
def test_an_exported_command_run_without_its_read_is_refused(line: str, tmp_path: Path) -> None:
    not_read = "echo 'error: no stack is selected' >&2; exit 255"
    assert exit_code(line, not_read, tmp_path) == 0  # what the docs must not teach
    eval_ = [c for c in line_commands("x.md", line, "") if c.argv[0] == "eval"]
    with pytest.raises(AssertionError, match="only once read"):
        classify(eval_[0], Context())


def test_an_exported_command_run_once_read_fails_when_the_read_does(tmp_path: Path) -> None:
    not_read = "echo 'error: no stack is selected' >&2; exit 255"
    assert exit_code(RUN_ONCE_READ, not_read, tmp_path) == 255
    assert exit_code(RUN_ONCE_READ, "echo 'exit 3'", tmp_path) == 3  # read: it runs
    ctx = Context()
    assert [classify(c, ctx) for c in line_commands("x.md", RUN_ONCE_READ, "")] == [
        "checked",
        "checked",
    ]


def program_copy(into: Path) -> Path:
    for name in (*COPIED, *(p.name for p in ROOT.glob("Pulumi.*.yaml"))):
        source, target = ROOT / name, into / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


RUNNABLE_DOCS = [d for d in DOCS if any(runs_here(c) for c in simple_commands(d))]


@pytest.mark.parametrize("doc", RUNNABLE_DOCS, ids=[d.name for d in RUNNABLE_DOCS])
def test_the_runnable_commands_run(doc: Path, tmp_path: Path) -> None:
    """In document order, in a copy of the program: each exits 0. What they write there must
    then agree with the checkout: the generated reference and the snapshots are up to date."""
    project = program_copy(tmp_path / "project")
    for command in (c for c in simple_commands(doc) if runs_here(c)):
        argv = [sys.executable if is_python(a) else a for a in command.argv]
        result = subprocess.run(argv, cwd=project, capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        module = module_of(command)
        if module == "gpu_cluster.offline":
            out = project / command.argv[command.argv.index("--out") + 1]
            assert (out / "kubernetes.yaml").is_file(), command
        if module == "tools.config_reference":
            written = (project / "docs" / "config-reference.md").read_text(encoding="utf-8")
            assert written == (ROOT / "docs" / "config-reference.md").read_text(encoding="utf-8")
        if module == "tools.update_snapshots":
            for stack in STACKS:
                for path in (ROOT / "tests" / "snapshots" / stack).iterdir():
                    rewritten = project / "tests" / "snapshots" / stack / path.name
                    assert rewritten.read_bytes() == path.read_bytes(), rewritten
