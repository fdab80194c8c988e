"""Stack outputs: where the pods are and the exact commands a user runs next (pure)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping

from gpu_cluster.config.derived import world_size
from gpu_cluster.config.schema import Settings
from gpu_cluster.plan import launch, runs
from gpu_cluster.plan.launch import Kube
from gpu_cluster.plan.verify import verify_command

# The engine config keys that pick an OpenShift stack's cluster (the default kubernetes
# provider), each with the oc/kubectl flag that picks the same: the flags have the provider's
# meanings (pulumi_kubernetes ProviderArgs: kubeconfig, context, cluster; kubectl options).
# The CLI each platform's exported commands run (OpenShift's own; kubectl with GKE's auth plugin).
OPENSHIFT_CLI = "oc"
GKE_CLI = "kubectl"
CONTEXT_KEY = "kubernetes:context"
KUBECONFIG_KEY = "kubernetes:kubeconfig"
TARGET_FLAGS = (
    (KUBECONFIG_KEY, "--kubeconfig"),
    (CONTEXT_KEY, "--context"),
    ("kubernetes:cluster", "--cluster"),
)
# The outputs that run oc or kubectl, each naming the context: a StatefulSet stack's (its
# verifyCommand with verify.enabled), a JobSet stack's.
STATEFUL_SET_COMMANDS = (
    "shellCommand",
    "launchCommand",
    "statusCommand",
    "stopCommand",
    "syncCommand",
    "verifyCommand",
    "timelineCommand",
)
JOB_SET_COMMANDS = ("statusCommand", "logsCommand", "stopCommand", "timelineCommand")
COMMAND_OUTPUTS = tuple(dict.fromkeys(STATEFUL_SET_COMMANDS + JOB_SET_COMMANDS))


def gke_context(s: Settings) -> str:
    """The kube context `gcloud container clusters get-credentials` writes for the stack's
    (zonal) cluster: gke_<project>_<zone>_<cluster> (google-cloud-sdk
    googlecloudsdk/api_lib/container/util.py, ClusterConfig.KubeContext)."""
    assert s.gcp is not None
    return f"gke_{s.gcp.project}_{s.gcp.zone}_{s.name}"


def is_kubeconfig_file(value: str) -> bool:
    """Whether `kubernetes:kubeconfig` names a file rather than holding a kubeconfig (the
    provider takes either, "the contents of a kubeconfig file or the path to a kubeconfig
    file"): contents are a YAML document of several lines or one JSON object."""
    return "\n" not in value and not value.lstrip().startswith("{")


def kube_target(config: Mapping[str, str]) -> tuple[str, ...]:
    """The oc/kubectl flags that pick the cluster the stack deploys to, from its engine config;
    () when they would not name one (no context and no kubeconfig file): a kubeconfig given as
    contents cannot be named on a command line, a cluster alone leaves the user to chance."""
    flags: list[str] = []
    for key, flag in TARGET_FLAGS:
        value = config.get(key)
        if value and (key != KUBECONFIG_KEY or is_kubeconfig_file(value)):
            flags += [flag, value]
    return tuple(flags) if {"--kubeconfig", "--context"} & set(flags) else ()


def no_context_message(cli: str) -> str:
    return (
        f"this stack sets no {CONTEXT_KEY} (nor {KUBECONFIG_KEY} as a file), so the commands it "
        f"exports would run {cli} on whatever context is current: set it (pulumi config set "
        f"{CONTEXT_KEY} <context>) and run pulumi up again"
    )


def no_context_command(cli: str) -> str:
    """What a command is instead when the stack names no context: without one, the command
    would act on whichever cluster is current when it is pasted, not the one deployed to."""
    # `false`, not `exit`: the command is meant for eval in the user's own shell.
    return f"echo {shlex.quote('gpu-cluster: ' + no_context_message(cli))} >&2; false"


def stack_outputs(s: Settings, cli: str, target: tuple[str, ...]) -> dict[str, object]:
    """`target`: the flags naming the cluster in every command (kube_target); () refuses to
    print the commands."""
    outputs: dict[str, object] = {
        "namespace": s.namespace,
        "podDnsNames": launch.pod_dns_names(s),
        "masterAddr": launch.master_addr(s),
        "worldSize": world_size(s),
    }
    commands: dict[str, Callable[[Settings, Kube], str]]
    if s.workload.kind == "jobset":
        commands = {
            "statusCommand": runs.status_command,
            "logsCommand": runs.logs_command,
            "stopCommand": runs.stop_command,
        }
    else:
        commands = {
            "shellCommand": launch.shell_command,
            "launchCommand": launch.launch_command,
            "statusCommand": launch.status_command,
            "stopCommand": launch.stop_command,
            "syncCommand": launch.sync_command,
        }
        if s.verify.enabled:
            commands["verifyCommand"] = verify_command
    commands["timelineCommand"] = launch.timeline_command
    for key, command in commands.items():
        outputs[key] = command(s, Kube(cli, target)) if target else no_context_command(cli)
    return outputs
