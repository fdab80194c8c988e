"""Runs submitted with `gpu-cluster run` (`workload.kind: jobset`): who may submit them, and
where they keep their checkpoints."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from gpu_cluster.config.base import Section
from gpu_cluster.config.values import MountPath, Subdomain


# A user or group name as the API server's authenticator reports it: RBAC takes any non-empty
# string (kubernetes pkg/apis/rbac/validation: a Subject's name only has to be set), but no
# authenticator reports one with whitespace at its ends or a control character in it.
def _subject_name(value: str) -> str:
    if value != value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(
            "has whitespace at an end or a control character, which no identity provider puts "
            "in a user's or group's name: write it as the cluster names it"
        )
    return value


SubjectName = Annotated[str, Field(min_length=1), AfterValidator(_subject_name)]


class RunSubmitters(Section):
    """Who is bound to the submitter Role (`<name>-run-submitter`): it may create, list, read
    and delete JobSets, read pods, their logs, Kueue's Workloads and LocalQueues and the run
    template, in the stack's namespace only. Empty: the Role is there, bound to no one."""

    groups: tuple[SubjectName, ...] = ()
    """Groups, as the cluster's identity provider names them (`oc get groups`; on GKE a Google
    group, only where the cluster has Google Groups for RBAC: `gcp.rbacSecurityGroup`; without
    it, it warns). Not a group the API server puts every requester in (`system:authenticated`,
    `system:serviceaccounts`...)."""
    users: tuple[SubjectName, ...] = ()
    """Users, as the API server names them (an OpenShift user, a Google account's email)."""
    service_accounts: tuple[Subdomain, ...] = ()
    """ServiceAccounts of the stack's namespace (a CI pipeline's); not the stack's own (its
    training pods', the node health gate's or runner's), whose processes would all gain the
    Role."""


class RunsSettings(Section):
    """Named runs a person submits, lists, follows and stops with `gpu-cluster run`, from the
    run template the stack publishes in its namespace (docs/cli.md, "Runs")."""

    submitters: RunSubmitters = RunSubmitters()
    """Who may submit and stop runs without the stack (its config or `pulumi up`)."""
    checkpoint_dir: MountPath | None = None
    """The directory under which each submitted run gets its own, `<checkpointDir>/<run name>`,
    in its CHECKPOINT_DIR environment variable (a script keeping the recovery contract saves and
    resumes there: docs/operations.md, "Checkpoints: what a training script does"). At or below
    a mount every pod shares and may write: a writable `storage.volumes` entry, or `/workspace`
    with `storage.mode: rwx`. Default: the writable bucket with `gcsFuse.use: checkpoints`, else
    the writable volume named `checkpoints`, else `/workspace/checkpoints`. A run's `--env
    CHECKPOINT_DIR=...` overrides it."""
