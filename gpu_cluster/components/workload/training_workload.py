"""The TrainingWorkload component: the training pods, one per GPU node, with their claims and
the objects they share, under the controller object of the workload kind."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1 import EnvVarArgs

from gpu_cluster.components.workload.args import TrainingWorkloadArgs
from gpu_cluster.components.workload.claims import register_claims
from gpu_cluster.components.workload.job_set import JOB_SET
from gpu_cluster.components.workload.kind import TrainingPods, WorkloadKind
from gpu_cluster.components.workload.pod_template import pod_template, shared_claim_volumes
from gpu_cluster.components.workload.shared_objects import (
    headless_service,
    metrics_scrape_object,
    opaque_secret,
    peers_only_policy,
    scripts_config_map,
    secret_env_refs,
)
from gpu_cluster.components.workload.stateful_set import STATEFUL_SET


class TrainingWorkload(pulumi.ComponentResource):
    """The training pods' controller (a StatefulSet, or a JobSet when `args.run` is set) +
    headless Service + scripts ConfigMap + storage for one training cluster."""

    controller_name: pulumi.Output[str]
    controller_urn: pulumi.Output[str]
    service_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: TrainingWorkloadArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:workload:TrainingWorkload", name, None, opts)
        a = args
        kind: WorkloadKind = STATEFUL_SET if a.run is None else JOB_SET
        child = pulumi.ResourceOptions(parent=self)
        config_map = scripts_config_map(name, a, child)
        claims = register_claims(name, a, self)
        secrets: list[k8s.core.v1.Secret] = []
        secret_env: list[EnvVarArgs] = []
        if a.secret_env_keys and a.secret_env is not None:
            # Tokens go into a Secret and reach the pod by reference, never as literal env.
            env_secret = opaque_secret(name, a, "env", a.secret_env, child)
            secrets.append(env_secret)
            secret_env = secret_env_refs(env_secret, a.secret_env_keys)
        service = headless_service(name, a, child)
        if a.code_sync_source is not None:
            # A secret codeSync (its URL may hold a token) reaches git-sync by reference.
            secrets.append(opaque_secret(name, a, "code-sync", a.code_sync_source, child))
        template = pod_template(
            a, shared_claim_volumes(a, [c.claim for c in claims]), secret_env, kind.pod_role(a)
        )
        peers_only_policy(name, a, child)
        metrics_scrape_object(name, a, child)
        controller = kind.controller(
            TrainingPods(
                resource_name=name,
                args=a,
                template=template,
                service=service,
                depends_on=(config_map, *secrets, *(c.resource for c in claims), *a.pods_after),
                parent=self,
            )
        )
        self.controller_name = controller.name
        self.controller_urn = controller.resource.urn
        self.service_name = service.metadata.name
        self.register_outputs(
            {"controllerName": self.controller_name, "serviceName": self.service_name}
        )
