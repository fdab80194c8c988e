"""The command line: `gpu-cluster` (also `python -m gpu_cluster`) with its subcommands render,
diff, summary, new, rights, doctor and run, and `python -m gpu_cluster.offline`, the render's older
spelling (render and diff in one command). Both render the Pulumi project found from the working
directory up (the first Pulumi.yaml), or the one `--project-dir` names.

Each secret value the render knows is written as a keyed digest; a diff names the secrets that
changed on stderr, never their values.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import NoReturn

import pulumi

from gpu_cluster.config.dates import pinned
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.offline.change_summary import add_arguments as add_summary_arguments
from gpu_cluster.offline.change_summary import write_summary
from gpu_cluster.offline.dashboard_cli import add_dashboard_arguments, dashboard_command
from gpu_cluster.offline.doctor import Stack, doctor
from gpu_cluster.offline.new_stack import new_stack, write_new_stack
from gpu_cluster.offline.project import Project, ProjectError, find_project, read_project
from gpu_cluster.offline.render import (
    FILES,
    OutputError,
    diff,
    read_render,
    render,
    secret_changes,
    write_render,
)
from gpu_cluster.offline.rights import CheckError, ask_cluster, report, stack_rights
from gpu_cluster.offline.run_cli import add_run_arguments, run_command
from gpu_cluster.offline.secret_digest import SecretDigestError
from gpu_cluster.offline.stack_files import checked_settings

EXIT_CODES = """exit codes:
  0  rendered (diff: no change; rights --check: every right held; doctor: no FAIL; run: done;
     dashboard: drawn)
  1  diff: the render differs from the earlier one; rights --check: a right is missing;
     doctor: something to fix (a FAIL line)
  2  bad config or usage, a project, output or earlier-render directory that cannot be used,
     a key for secret digests that cannot be kept, or a program that refuses its config as
     `pulumi preview` would (one message; nothing written); rights --check: no answer;
     run: refused (no context, no right, no template, no queue, no such run, over quota);
     dashboard: nothing to draw, or the Prometheus API did not answer
  3  a crash: an error the command did not expect (its traceback on stderr)"""
# Any exit code from this one up: neither "changed" (1) nor "refused" (2) to a script.
CRASHED = 3
DISTRIBUTION = "gpu-cluster"


def package_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        # Run from a checkout that was never installed: no metadata holds a version.
        return "unknown (not installed)"


def _project_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project-dir",
        metavar="DIR",
        help="the Pulumi project (its Pulumi.yaml and stack files); default: the first "
        "directory holding a Pulumi.yaml, from the working directory up",
    )


def _stack_arguments(parser: argparse.ArgumentParser) -> None:
    """--stack, --set and --project-dir as `rights` and `doctor` take them (as for render)."""
    parser.add_argument("--stack", required=True, help="stack name (reads Pulumi.<stack>.yaml)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="as for render"
    )
    _project_dir_argument(parser)


def _stacks_epilog(argv: Sequence[str]) -> str:
    """The stacks of the project `argv` names (or that is found from here), and the exit codes:
    what --help shows below the options. Only --help shows it: any other run reads the project
    once, where it renders."""
    if not {"-h", "--help"} & set(argv):
        return EXIT_CODES
    early = argparse.ArgumentParser(add_help=False)
    _project_dir_argument(early)
    known, _ = early.parse_known_args(argv)
    try:
        project = _project(known.project_dir)
    except (ProjectError, ConfigError) as exc:
        found = f"stacks: none found ({exc})"
    else:
        found = (
            f"stacks of project {project.name!r} ({project.directory}): "
            f"{', '.join(project.stacks()) or 'none'}"
        )
    return f"{found}\n\n{EXIT_CODES}"


def _project(project_dir: str | None) -> Project:
    if project_dir == "":
        raise ProjectError("--project-dir: an empty path; give a directory")
    if project_dir is not None:
        return read_project(Path(project_dir))
    return find_project(Path.cwd())


def _render_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="stack name (reads Pulumi.<stack>.yaml)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key as `pulumi config set [--path]` would (repeatable)",
    )
    parser.add_argument(
        "--set-secret",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="like --set, as `pulumi config set --secret` (rendered as a keyed digest)",
    )
    parser.add_argument(
        "--as-of",
        metavar="YYYY-MM-DD",
        help="date of the date-dependent checks (GKE support windows); an ended window is "
        "then refused, not warned about (default: today, UTC)",
    )
    _project_dir_argument(parser)


def _render_and_diff(
    args: argparse.Namespace, out_arg: str | None, old_arg: str | None, old_label: str = "--diff"
) -> int:
    """Render `args.stack`, write it to `out_arg` and/or diff it against the earlier render in
    `old_arg` (named in messages `--out` and `old_label`: the flag or the argument that gave
    it); the exit code."""
    # Path("") is the current directory: an empty value (an unset shell variable) is a mistake.
    for flag, value in (("--out", out_arg), (old_label, old_arg)):
        if value == "":
            print(f"error: {flag}: an empty path; give a directory", file=sys.stderr)
            return 2
    to_stdout = out_arg == "-"  # kubernetes.yaml alone, for `kubectl apply -f -` or `diff -f -`
    if to_stdout and old_arg is not None:
        print("error: --out -: the diff goes to stdout; give a directory", file=sys.stderr)
        return 2
    out = Path(out_arg) if out_arg is not None and not to_stdout else None
    try:
        as_of = pinned(args.as_of) if args.as_of is not None else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        project = _project(args.project_dir)
        # Read before anything is written: `--diff D --out D` compares with D as it was.
        old = read_render(Path(old_arg), old_label) if old_arg is not None else None
        files = render(
            args.stack,
            tuple(args.set),
            tuple(args.set_secret),
            warn=lambda w: print(f"warning: {w}", file=sys.stderr),
            project=project,
            as_of=as_of,
        )
        if out is not None:
            write_render(out, files)
            print(
                f"rendered stack {args.stack!r} to {out}/ ({', '.join(FILES)})",
                file=sys.stderr,
            )
        elif to_stdout:
            sys.stdout.write(files["kubernetes.yaml"])
    except (
        ConfigError,
        FileNotFoundError,
        OutputError,
        ProjectError,
        SecretDigestError,
        # A program's own refusal (a required key unset, a bad value), which `pulumi preview`
        # reports as `error: <message>`.
        pulumi.RunError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if old is not None:
        changes = diff(old, files, str(old_arg))
        sys.stdout.write(changes)
        # The diff shows a changed secret as one marker for another; say where it is.
        for line in secret_changes(old, files):
            print(f"{old_label} {old_arg}: {line}", file=sys.stderr)
        return 1 if changes else 0
    return 0


def _new(args: argparse.Namespace) -> int:
    """`gpu-cluster new`: write the stack's file, then say what is left to do."""
    try:
        project = _project(args.project_dir)
        stack = new_stack(project, args.stack, args.source, tuple(args.set), tuple(args.unset))
        path = write_new_stack(project, stack)
    except (ConfigError, FileNotFoundError, ProjectError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for warning in stack.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"wrote {path}; next: pulumi stack init {stack.name}", file=sys.stderr)
    for key in stack.secrets:
        print(
            f"not copied, a secret of {args.source}: pulumi config set --secret --path "
            f"'{key}' VALUE --stack {stack.name}",
            file=sys.stderr,
        )
    return 0


def _rights(args: argparse.Namespace) -> int:
    """`gpu-cluster rights`: list the rights (and, with --check, read them); 1 if one is missing."""
    try:
        project = _project(args.project_dir)
        found = stack_rights(args.stack, tuple(args.set), project.directory)
        text, held = report(found, args.cli, ask_cluster if args.check else None)
    except (CheckError, ConfigError, FileNotFoundError, ProjectError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0 if held else 1


def _doctor(args: argparse.Namespace) -> int:
    """`gpu-cluster doctor`: the config checked offline (a refusal exits 2), then one line per
    check; 1 if one FAILed."""
    try:
        project = _project(args.project_dir)
        checked = checked_settings(args.stack, tuple(args.set), project.directory)
    except (ConfigError, FileNotFoundError, ProjectError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stack = Stack(args.stack, project.directory, checked)
    findings = doctor(stack)
    shown = {f.detail for f in findings}  # a placeholder's warning is its FAIL line
    for warning in checked.warnings:
        if warning not in shown:
            print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.write("".join(f"{f.line()}\n" for f in findings))
    return 1 if any(f.verdict == "FAIL" for f in findings) else 0


def offline_main(argv: list[str] | None = None) -> int:
    """`python -m gpu_cluster.offline --stack S [--out DIR] [--diff OLD_DIR]`."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m gpu_cluster.offline",
        description="Offline render: the desired state of a stack, with no CLI, cloud or "
        "cluster (also `gpu-cluster render` and `gpu-cluster diff`).",
        epilog=_stacks_epilog(argv),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _render_arguments(parser)
    parser.add_argument(
        "--out", help="directory to write the render to (`-`: kubernetes.yaml to stdout)"
    )
    parser.add_argument("--diff", metavar="OLD_DIR", help="diff against an earlier render")
    args = parser.parse_args(argv)
    if args.out is None and args.diff is None:
        parser.error("give --out DIR, --diff OLD_DIR, or both")
    return _render_and_diff(args, args.out, args.diff)


def main(argv: list[str] | None = None) -> int:
    """`gpu-cluster render | diff | summary | new | rights | doctor | run`."""
    argv = sys.argv[1:] if argv is None else argv
    epilog = _stacks_epilog(argv)
    parser = argparse.ArgumentParser(
        prog="gpu-cluster",
        description="Render a Pulumi program built on gpu-cluster offline (no Pulumi CLI, "
        "cloud or cluster), diff it against an earlier render, or summarize a change.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    render_cmd = command(
        "render", "write a stack's render (kubernetes.yaml, resources.json, outputs.json)"
    )
    _render_arguments(render_cmd)
    render_cmd.add_argument(
        "--out",
        required=True,
        help="directory to write the render to; `-`: kubernetes.yaml alone to stdout (for "
        "`kubectl apply -f -` or `kubectl diff -f -`)",
    )
    diff_cmd = command(
        "diff", "render a stack and show how it differs from an earlier render (exit 1 if so)"
    )
    _render_arguments(diff_cmd)
    diff_cmd.add_argument("old", metavar="OLD_DIR", help="an earlier render (render --out)")
    diff_cmd.add_argument("--out", help="also write the new render here")
    summary_cmd = command(
        "summary",
        "markdown summary of the change between two renders of every stack (BASE_DIR/<stack>/, "
        "HEAD_DIR/<stack>/)",
    )
    add_summary_arguments(summary_cmd)
    new_cmd = command(
        "new",
        "write a new stack's file (Pulumi.<stack>.yaml) from an existing stack's config, its "
        "training run as queued JobSets (workload.kind: jobset), checked before it is written",
    )
    new_cmd.add_argument("--stack", required=True, help="the new stack's name")
    new_cmd.add_argument(
        "--from", dest="source", required=True, metavar="STACK", help="the stack to start from"
    )
    new_cmd.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a config key as `pulumi config set [--path]` would (repeatable; "
        "workload.kind=statefulset keeps a StatefulSet)",
    )
    new_cmd.add_argument(
        "--unset",
        action="append",
        default=[],
        metavar="KEY",
        help="remove a config key as `pulumi config rm [--path]` would (repeatable; before "
        "the --sets)",
    )
    _project_dir_argument(new_cmd)
    rights_cmd = command(
        "rights",
        "the cluster-level rights a stack's `pulumi up` needs beyond a project admin's (an SCC, "
        "a MachineConfig, a namespace, CRDs), each with the way to run without it; --check "
        "reads them from the stack's cluster with `oc auth can-i`",
    )
    _stack_arguments(rights_cmd)
    rights_cmd.add_argument(
        "--check", action="store_true", help="ask the cluster; exit 1 if a right is missing"
    )
    rights_cmd.add_argument(
        "--cli", choices=("oc", "kubectl"), default="oc", help="what runs the reads"
    )
    doctor_cmd = command(
        "doctor",
        "check what a stack's `pulumi up` and exported commands need on this machine (the "
        "Pulumi CLI and login, oc/kubectl/gcloud, the kube context and API, Kueue's namespace "
        "label, GCP APIs, placeholders): PASS, FAIL with the fix, or SKIP; exit 1 on a FAIL",
    )
    _stack_arguments(doctor_cmd)
    run_cmd = command(
        "run",
        "named runs of a JobSet stack from the run template it publishes, on its kube context: "
        "submit, list, status, logs, stop (the Kubernetes client: pip install "
        "'gpu-cluster[runs]')",
    )
    add_run_arguments(run_cmd, _stack_arguments)
    dashboard_cmd = command(
        "dashboard",
        "draw the stack's dashboard (GPUs, runs, goodput, queue, node health) as an SVG from "
        "a Prometheus HTTP API's answers over the last hour (--since)",
    )
    add_dashboard_arguments(dashboard_cmd, _stack_arguments)

    args = parser.parse_args(argv)
    if args.command == "run":
        # `run logs -f` may follow a run for hours: its garbage is collected as usual.
        gc.enable()
        return run_command(args, lambda: _project(args.project_dir).directory)
    if args.command == "doctor":
        return _doctor(args)
    if args.command == "dashboard":
        return dashboard_command(args, lambda: _project(args.project_dir).directory)
    if args.command == "rights":
        return _rights(args)
    if args.command == "summary":
        return write_summary(summary_cmd, args)
    if args.command == "new":
        return _new(args)
    if args.command == "diff":
        return _render_and_diff(args, args.out, args.old, old_label="OLD_DIR")
    return _render_and_diff(args, args.out, None)


def run_cli(entry: Callable[[], int] = main) -> NoReturn:
    # One command and out (os._exit below): its cyclic garbage never needs collecting (but
    # `run`'s, which may last: main turns the collector back on), and the collector's passes
    # over the SDK's imports and, after the run, over everything the run allocated are 8-15%
    # of a 512-node render's CPU time (docs/performance.md).
    gc.disable()
    try:
        exit_code = entry()
    except Exception:  # a bug, told apart from a change (1) and a refusal (2)
        traceback.print_exc()
        exit_code = CRASHED
    # Everything is written: skip the interpreter's teardown of the SDK's modules, a third of
    # the command's time (bench/profile_render.py, section 4).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
