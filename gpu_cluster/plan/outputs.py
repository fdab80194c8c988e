"""Stack outputs: where the pods are and the exact commands a user runs next (pure)."""

from __future__ import annotations

import shlex

from gpu_cluster.config.schema import Settings
from gpu_cluster.plan import launch
from gpu_cluster.plan.launch import Kube
from gpu_cluster.plan.verify import verify_command

# The engine config key that picks an OpenShift stack's cluster (the default kubernetes provider).
CONTEXT_KEY = "kubernetes:context"
# The outputs that run oc or kubectl: each names the context.
COMMAND_OUTPUTS = ("shellCommand", "launchCommand", "syncCommand", "verifyCommand")


def gke_context(s: Settings) -> str:
    """The kube context `gcloud container clusters get-credentials` writes for the stack's
    (zonal) cluster: gke_<project>_<zone>_<cluster> (google-cloud-sdk
    googlecloudsdk/api_lib/container/util.py, ClusterConfig.KubeContext)."""
    assert s.gcp is not None
    return f"gke_{s.gcp.project}_{s.gcp.zone}_{s.name}"


def no_context_message(cli: str) -> str:
    return (
        f"this stack sets no {CONTEXT_KEY}, so the commands it exports would run {cli} on "
        f"whatever context is current: set it (pulumi config set {CONTEXT_KEY} <context>) and "
        "run pulumi up again"
    )


def no_context_command(cli: str) -> str:
    """What a command is instead when the stack names no context: without one, the command
    would act on whichever cluster is current when it is pasted, not the one deployed to."""
    # `false`, not `exit`: the command is meant for eval in the user's own shell.
    return f"echo {shlex.quote('gpu-cluster: ' + no_context_message(cli))} >&2; false"


def stack_outputs(s: Settings, cli: str, context: str | None) -> dict[str, object]:
    """`context`: the kube context every command names; None refuses to print the commands."""
    outputs: dict[str, object] = {
        "namespace": s.namespace,
        "podDnsNames": launch.pod_dns_names(s),
        "masterAddr": launch.master_addr(s),
        "worldSize": s.world_size,
    }
    builders = (launch.shell_command, launch.launch_command, launch.sync_command, verify_command)
    commands = dict(zip(COMMAND_OUTPUTS, builders, strict=True))
    if not s.verify.enabled:
        del commands["verifyCommand"]
    for key, command in commands.items():
        outputs[key] = (
            no_context_command(cli) if context is None else command(s, Kube(cli, context))
        )
    return outputs
