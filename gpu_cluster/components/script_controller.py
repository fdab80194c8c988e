"""A controller the stack runs as a script in one pod (the node health gate, the node health
runner): its ServiceAccount with only the rights it is given, the script with kube_api.py in a
ConfigMap, the Deployment that runs it in a plain Python image, and no ingress but the
platform's Prometheus on its metrics port, with the object that has it scraped, when it serves
metrics."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.apps.v1 import DeploymentSpecArgs, DeploymentStrategyArgs
from pulumi_kubernetes.core.v1 import (
    ConfigMapVolumeSourceArgs,
    ContainerArgs,
    ContainerPortArgs,
    EnvVarArgs,
    KeyToPathArgs,
    PodSecurityContextArgs,
    PodSpecArgs,
    PodTemplateSpecArgs,
    ResourceRequirementsArgs,
    SeccompProfileArgs,
    VolumeArgs,
    VolumeMountArgs,
)
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs
from pulumi_kubernetes.networking.v1 import NetworkPolicySpecArgs
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs, RoleRefArgs, SubjectArgs

from gpu_cluster.components.metrics_scrape import scrape_object, scrapers_ingress
from gpu_cluster.components.workload.pod_args import security_context
from gpu_cluster.plan.podspec import SCRIPTS_DIR
from gpu_cluster.plan.run_metrics import METRICS_PORT_NAME, MetricsScrape
from gpu_cluster.plan.security import REQUIRED_SCC_ANNOTATION, RESTRICTED_SCC
from gpu_cluster.plan.shipped import KUBE_API_SCRIPT, PACKAGE, PACKAGE_PATH, SCRIPTS_PATH

RBAC_GROUP = "rbac.authorization.k8s.io"
# One pass of a script needs a few MiB and milliseconds of CPU; Python's own start is most of
# it: 0.2-0.4 CPU s to import the scripts (measured here), which a 10m limit (1 ms of CPU per
# 100 ms) stretched to minutes on a loaded node, the gate's AdmissionCheck inactive meanwhile.
# So a small request, and a limit that lets the start take a second or two.
RESOURCES = {"cpu": "10m", "memory": "64Mi"}
LIMITS = {"cpu": "200m", "memory": "128Mi"}
# The pod's template carries the scripts' digest, so an edit of them starts a new pod.
SCRIPTS_DIGEST_ANNOTATION = "gpu-cluster.io/scripts-sha256"


@dataclass(frozen=True)
class ScriptController:
    """`script` (in scripts/) run by container `container` as `name` (its objects' and
    ServiceAccount's name) in `namespace` with `env`, in `image`, as `run_as_user` (None: the
    platform assigns one).
    `rules`: its rights in the namespace; `cluster_rules`: cluster-wide ones. `annotations`:
    the Deployment's (the security scan's exceptions). `modules`: what the script imports from
    beside it besides kube_api.py, shipped with it. `package_modules`: this package's modules
    it imports (paths in the package; pure, standard library only), shipped beside it as the
    package with their folders' `__init__.py`."""

    name: str
    namespace: str
    labels: dict[str, str]
    container: str
    script: str
    env: dict[str, str]
    image: str
    run_as_user: int | None
    rules: Sequence[PolicyRuleArgs]
    cluster_rules: Sequence[PolicyRuleArgs]
    annotations: dict[str, str]
    modules: tuple[str, ...] = ()
    package_modules: tuple[str, ...] = ()
    # Its CPU and memory, requested and at most.
    requests: tuple[tuple[str, str], ...] = tuple(RESOURCES.items())
    limits: tuple[tuple[str, str], ...] = tuple(LIMITS.items())
    # The port the script serves metrics on (its container's port `metrics`), and how the
    # platform's Prometheus scrapes it; None: none.
    metrics_port: int | None = None
    scrape: MetricsScrape | None = None


def run_script(
    parent: pulumi.Resource,
    prefix: str,
    c: ScriptController,
    after: Sequence[pulumi.Resource],
    deployment_after: Sequence[pulumi.Resource] = (),
) -> k8s.apps.v1.Deployment:
    """`c`'s objects as children of `parent`, named `prefix`-..., the namespaced ones after
    `after`, the Deployment also after `deployment_after`; returns the Deployment."""
    child = pulumi.ResourceOptions(parent=parent, depends_on=list(after))
    meta = ObjectMetaArgs(name=c.name, namespace=c.namespace, labels=c.labels)
    # Cluster-scoped names: the same stack name in two namespaces must not share them.
    cluster_name = f"{c.namespace}-{c.name}"
    cluster_meta = ObjectMetaArgs(name=cluster_name, labels=c.labels)
    account = k8s.core.v1.ServiceAccount(f"{prefix}-account", metadata=meta, opts=child)
    subject = SubjectArgs(kind="ServiceAccount", name=c.name, namespace=c.namespace)
    role = k8s.rbac.v1.Role(f"{prefix}-role", metadata=meta, rules=list(c.rules), opts=child)
    bindings: list[pulumi.Resource] = [
        k8s.rbac.v1.RoleBinding(
            f"{prefix}-binding",
            metadata=meta,
            role_ref=RoleRefArgs(api_group=RBAC_GROUP, kind="Role", name=c.name),
            subjects=[subject],
            opts=pulumi.ResourceOptions(parent=parent, depends_on=[role, account]),
        )
    ]
    # Cluster-scoped objects only for cluster-wide rights: creating them is a cluster admin's.
    if c.cluster_rules:
        cluster_role = k8s.rbac.v1.ClusterRole(
            f"{prefix}-cluster-role",
            metadata=cluster_meta,
            rules=list(c.cluster_rules),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        bindings.append(
            k8s.rbac.v1.ClusterRoleBinding(
                f"{prefix}-cluster-binding",
                metadata=cluster_meta,
                role_ref=RoleRefArgs(api_group=RBAC_GROUP, kind="ClusterRole", name=cluster_name),
                subjects=[subject],
                opts=pulumi.ResourceOptions(parent=parent, depends_on=[cluster_role, account]),
            )
        )
    shipped = (c.script, *c.modules, KUBE_API_SCRIPT)
    scripts = {name: (SCRIPTS_PATH / name).read_text() for name in shipped}
    # A ConfigMap's keys name no folder: the package's files by dotted key, put in place by
    # the volume's items.
    packaged = {_package_key(path): (PACKAGE_PATH / path).read_text() for path in _package(c)}
    digest = hashlib.sha256(
        "".join(text for _, text in sorted({**scripts, **packaged}.items())).encode()
    ).hexdigest()
    config_map = k8s.core.v1.ConfigMap(
        f"{prefix}-script",
        metadata=ObjectMetaArgs(name=f"{c.name}-script", namespace=c.namespace, labels=c.labels),
        data={**scripts, **packaged},
        opts=child,
    )
    items = (
        [KeyToPathArgs(key=name, path=name) for name in scripts]
        + [KeyToPathArgs(key=_package_key(path), path=f"{PACKAGE}/{path}") for path in _package(c)]
        if packaged
        else None
    )
    container = ContainerArgs(
        name=c.container,
        image=c.image,
        # A small image by tag: a restart picks up the tag's newest patch release.
        image_pull_policy="Always",
        command=["python3", f"{SCRIPTS_DIR}/{c.script}"],
        env=[
            EnvVarArgs(name=k, value=v)
            for k, v in {**c.env, "PYTHONDONTWRITEBYTECODE": "1"}.items()
        ],
        resources=ResourceRequirementsArgs(requests=dict(c.requests), limits=dict(c.limits)),
        security_context=security_context((), read_only_root=True),
        volume_mounts=[VolumeMountArgs(name="script", mount_path=SCRIPTS_DIR, read_only=True)],
        ports=[ContainerPortArgs(name=METRICS_PORT_NAME, container_port=c.metrics_port)]
        if c.metrics_port is not None
        else None,
    )
    template_annotations = {
        REQUIRED_SCC_ANNOTATION: RESTRICTED_SCC,
        SCRIPTS_DIGEST_ANNOTATION: digest,
    }
    deployment = k8s.apps.v1.Deployment(
        f"{prefix}-deployment",
        metadata=ObjectMetaArgs(
            name=c.name, namespace=c.namespace, labels=c.labels, annotations=c.annotations
        ),
        spec=DeploymentSpecArgs(
            replicas=1,
            selector=LabelSelectorArgs(match_labels=c.labels),
            # One writer at a time: the old pod goes before the new one starts.
            strategy=DeploymentStrategyArgs(type="Recreate"),
            template=PodTemplateSpecArgs(
                metadata=ObjectMetaArgs(labels=c.labels, annotations=template_annotations),
                spec=PodSpecArgs(
                    service_account_name=c.name,
                    security_context=PodSecurityContextArgs(
                        run_as_non_root=True,
                        run_as_user=c.run_as_user,
                        seccomp_profile=SeccompProfileArgs(type="RuntimeDefault"),
                    ),
                    containers=[container],
                    volumes=[
                        VolumeArgs(
                            name="script",
                            config_map=ConfigMapVolumeSourceArgs(
                                name=f"{c.name}-script", items=items
                            ),
                        )
                    ],
                ),
            ),
        ),
        opts=pulumi.ResourceOptions(
            parent=parent, depends_on=[config_map, *bindings, *after, *deployment_after]
        ),
    )
    # Nobody calls the script but the platform's Prometheus, on its metrics port when it serves
    # metrics; it calls the API server, whose address the program does not know (GKE's control
    # plane is outside the cluster network): egress stays open.
    scrapers = [scrapers_ingress(c.scrape)] if c.scrape is not None else None
    k8s.networking.v1.NetworkPolicy(
        f"{prefix}-ingress",
        metadata=ObjectMetaArgs(name=f"{c.name}-ingress", namespace=c.namespace, labels=c.labels),
        spec=NetworkPolicySpecArgs(
            pod_selector=LabelSelectorArgs(match_labels=c.labels),
            policy_types=["Ingress"],
            ingress=scrapers,
        ),
        opts=child,
    )
    if c.scrape is not None:
        metadata = ObjectMetaArgs(name=f"{c.name}-metrics", namespace=c.namespace, labels=c.labels)
        scrape_object(f"{prefix}-metrics", c.scrape, metadata, c.labels, child)
    return deployment


def _package(c: ScriptController) -> list[str]:
    """`c.package_modules` and every `__init__.py` on their way, in the package."""
    inits = {
        "/".join([*parts[:depth], "__init__.py"])
        for parts in (path.split("/") for path in c.package_modules)
        for depth in range(len(parts))
    }
    return sorted(inits | set(c.package_modules)) if c.package_modules else []


def _package_key(path: str) -> str:
    return f"{PACKAGE}.{path.replace('/', '.')}"
