"""`gpu-cluster rights`: the cluster-level rights a stack's `pulumi up` needs
(gpu_cluster.plan.rights), and with `--check` whether the user has them, read from the cluster
with `oc auth can-i` (a SelfSubjectAccessReview each) before anything is applied."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpu_cluster.offline.external import NoAnswerError, run_tool
from gpu_cluster.offline.stack_files import checked_settings
from gpu_cluster.plan.outputs import CONTEXT_KEY, kube_target
from gpu_cluster.plan.rights import Check, Right, can_i_argv, can_i_command, cluster_rights

# One review is one API request; past this the cluster is taken as unreachable.
CHECK_TIMEOUT_SECONDS = 30


class CheckError(Exception):
    """A check that gave neither yes nor no (no oc, an unreachable or refusing cluster)."""


# Runs `oc`/`kubectl` with the given arguments: (exit status, stdout, stderr).
Runner = Callable[[tuple[str, ...]], tuple[int, str, str]]


def ask_cluster(argv: tuple[str, ...]) -> tuple[int, str, str]:
    try:
        answer = run_tool(argv, CHECK_TIMEOUT_SECONDS)
    except NoAnswerError as exc:
        hint = " (give --cli kubectl to use kubectl)" if exc.missing else ""
        raise CheckError(f"{exc}{hint}") from None
    return answer.status, answer.out, answer.err


@dataclass(frozen=True)
class StackRights:
    rights: tuple[Right, ...]
    target: tuple[str, ...]  # the flags naming the stack's cluster; () the current context


def stack_rights(stack: str, overrides: tuple[str, ...], project_dir: Path) -> StackRights:
    """The rights `stack` (with `--set`s) needs, and its cluster; raises ConfigError."""
    checked = checked_settings(stack, overrides, project_dir)
    return StackRights(cluster_rights(checked.settings), kube_target(checked.config))


def allowed(check: Check, cli: str, target: tuple[str, ...], run: Runner) -> bool:
    """`oc auth can-i` prints yes (exit 0) or no (exit 1); anything else is no answer."""
    status, out, err = run(can_i_argv(check, cli, target))
    answer = out.strip().split()[0] if out.strip() else ""
    if status == 0 and answer == "yes":
        return True
    if status == 1 and answer == "no":
        return False
    raise CheckError(
        f"`{can_i_command(check, cli, target)}` gave no yes or no: "
        f"{(err or out).strip() or f'exit {status}'}"
    )


def report(found: StackRights, cli: str, run: Runner | None) -> tuple[str, bool]:
    """The rights, each with its reads and the path without it; with `run`, each read's
    answer. (text, whether every right is held: True when not checked)."""
    if not found.rights:
        return "this stack needs no rights beyond a project admin's in its namespace\n", True
    lines: list[str] = []
    held_all = True
    if not found.target:
        lines.append(
            f"note: the stack sets no {CONTEXT_KEY}: the reads below ask the current context"
        )
    for right in found.rights:
        answers: list[list[bool]] = []
        if run is not None:
            answers = [[allowed(c, cli, found.target, run) for c in way] for way in right.any_of]
        held = run is None or any(all(a) for a in answers)
        held_all = held_all and held
        verdict = "" if run is None else (": held" if held else ": MISSING")
        lines.append(f"{right.needed_for}{verdict}")
        for n, way in enumerate(right.any_of):
            lines.append("  either" if n == 0 else "  or")
            for k, check in enumerate(way):
                answer = "" if run is None else ("  # yes" if answers[n][k] else "  # no")
                lines.append(f"    {can_i_command(check, cli, found.target)}{answer}")
        lines.append(f"  without it: {right.without}")
    return "\n".join(lines) + "\n", held_all
