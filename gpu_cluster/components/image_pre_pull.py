"""The ImagePrePull component: the training image on every node the training pods may run on,
before they start or change (openshift.prePull).

A DaemonSet whose one container idles in the image, as xpk's `cluster cacheimage` does
(AI-Hypercomputer/xpk src/xpk/templates/cluster_preheat.yaml.j2 at 554bde4; each deviation, with
its reason, in tests/vendor/gke_gpudirect.yaml). `pulumi up` awaits a DaemonSet until every node
runs its current pod (pulumi/pulumi-kubernetes#2953), so a workload that waits for this one
starts or rolls with the image already on its nodes; the idle container keeps the image in use,
so the kubelet's image garbage collection never removes it between runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.apps.v1 import (
    DaemonSetSpecArgs,
    DaemonSetUpdateStrategyArgs,
    RollingUpdateDaemonSetArgs,
)
from pulumi_kubernetes.core.v1 import (
    AffinityArgs,
    ContainerArgs,
    PodSecurityContextArgs,
    PodSpecArgs,
    PodTemplateSpecArgs,
    ResourceRequirementsArgs,
    SeccompProfileArgs,
)
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs
from pulumi_kubernetes.networking.v1 import NetworkPolicySpecArgs

from gpu_cluster.components.workload.pod_args import (
    node_affinity,
    security_context,
    start_timeouts,
    toleration_args,
)
from gpu_cluster.plan.podspec import IDLE_COMMAND, IDLE_RESOURCES, PodPlacement
from gpu_cluster.plan.scan_exceptions import pre_pull_exceptions, skip_annotations
from gpu_cluster.plan.security import REQUIRED_SCC_ANNOTATION, RESTRICTED_SCC


@dataclass(frozen=True)
class ImagePrePullArgs:
    """name: the DaemonSet's. labels: its pods', not the training pods' (their one-pod-per-node
    anti-affinity selects those). placement: the training pods' nodes and tolerations.
    service_account: the training pods' (the same image pull credentials). start_timeout_minutes:
    how long `pulumi up` waits for every node to run its pod. after: what the DaemonSet waits for
    (the namespace)."""

    name: str
    namespace: str
    labels: dict[str, str]
    image: str
    placement: PodPlacement
    service_account: pulumi.Input[str]
    start_timeout_minutes: int
    after: Sequence[pulumi.Resource] = ()


class ImagePrePull(pulumi.ComponentResource):
    """The pre-pull DaemonSet of `args`, with a NetworkPolicy that isolates its pods;
    `daemon_set` is what the workload waits for."""

    daemon_set: k8s.apps.v1.DaemonSet

    def __init__(
        self, name: str, args: ImagePrePullArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:images:ImagePrePull", name, None, opts)
        a = args
        container = ContainerArgs(
            name="pre-pull",
            image=a.image,
            command=list(IDLE_COMMAND),
            resources=ResourceRequirementsArgs(requests=IDLE_RESOURCES, limits=IDLE_RESOURCES),
            security_context=security_context((), read_only_root=True),
        )
        spec = PodSpecArgs(
            service_account_name=a.service_account,
            automount_service_account_token=False,
            # The SCC assigns the user from the namespace's range, as for the training pods.
            security_context=PodSecurityContextArgs(
                run_as_non_root=True,
                run_as_user=a.placement.run_as_user,
                seccomp_profile=SeccompProfileArgs(type="RuntimeDefault"),
            ),
            affinity=AffinityArgs(node_affinity=node_affinity(a.placement.node_requirements)),
            tolerations=toleration_args(a.placement),
            containers=[container],
        )
        self.daemon_set = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=ObjectMetaArgs(
                name=a.name,
                namespace=a.namespace,
                labels=a.labels,
                annotations=skip_annotations(pre_pull_exceptions(a.image)),
            ),
            spec=DaemonSetSpecArgs(
                selector=LabelSelectorArgs(match_labels=a.labels),
                # A new image is pulled by a second pod beside the old one on every node at
                # once; the old pod, and so the old image, goes once the new one runs.
                update_strategy=DaemonSetUpdateStrategyArgs(
                    type="RollingUpdate",
                    rolling_update=RollingUpdateDaemonSetArgs(max_surge="100%", max_unavailable=0),
                ),
                template=PodTemplateSpecArgs(
                    metadata=ObjectMetaArgs(
                        labels=a.labels,
                        # Nothing beyond the default SCC, whatever else the account may use.
                        annotations={REQUIRED_SCC_ANNOTATION: RESTRICTED_SCC},
                    ),
                    spec=spec,
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(a.after),
                # Every node pulls the whole training image, as a new training pod would.
                custom_timeouts=start_timeouts(a.start_timeout_minutes),
            ),
        )
        # The pods talk to nobody (the node's runtime pulls the image, not the pod): no
        # traffic in or out.
        k8s.networking.v1.NetworkPolicy(
            f"{name}-isolated",
            metadata=ObjectMetaArgs(
                name=f"{a.name}-isolated", namespace=a.namespace, labels=a.labels
            ),
            spec=NetworkPolicySpecArgs(
                pod_selector=LabelSelectorArgs(match_labels=a.labels),
                policy_types=["Ingress", "Egress"],
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(a.after)),
        )
        self.register_outputs({"daemonSet": self.daemon_set.metadata.name})
