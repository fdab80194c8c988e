"""The stack's namespace and objects adopted from the cluster, on both platforms.

namespaceMode create | adopt (reference creates nothing); Pulumi's `import` option for adopted
objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

# What the platform writes into every namespace: the API server's kubernetes.io/metadata.name
# label and `kubernetes` finalizer, OpenShift's PodSecurity label syncer labels and SCC range
# annotations (openshift.io/sa.scc.*), `oc new-project`'s openshift.io/requester. An import
# takes the live labels, annotations and spec as the resource's inputs (pulumi-kubernetes
# v4.32.0 provider/pkg/provider/provider.go Read: only creationTimestamp, generation,
# managedFields, resourceVersion, uid and two annotations are dropped), so without this the
# first preview after adopting shows them all being removed (and Pulumi CLIs before 3.174 refuse
# the import). The engine applies ignoreChanges to imports (pulumi/pulumi v3.259.0
# pkg/resource/deploy/step_generator.go).
NAMESPACE_PLATFORM_FIELDS = ("metadata.labels", "metadata.annotations", "spec")


def adopted(
    namespace: str | None, name: str, platform_owned: tuple[str, ...] = ()
) -> pulumi.ResourceOptions:
    """Import an existing object into the stack instead of creating it (pulumi-kubernetes
    >= 4.29 fails creating one that exists). The ID is "<namespace>/<name>", or "<name>" for
    cluster-scoped kinds (pulumi/pulumi-kubernetes provider/pkg/provider/util.go parseFqName).
    It existed before the stack, so `pulumi destroy` leaves it in place. `platform_owned`:
    fields others keep writing, which the stack neither declares nor changes."""
    return pulumi.ResourceOptions(
        import_=f"{namespace}/{name}" if namespace else name,
        retain_on_delete=True,
        ignore_changes=list(platform_owned) or None,
    )


# Makes pulumi-kubernetes' server-side apply take the fields it sets even where another field
# manager owns them (provider/pkg/await/await.go patchForce, at v4.25.0 and at 94977969).
PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"


def taken_over(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` of an object the stack adopts and then changes (a NAD whose `spec.config`
    differs from the stack's): the tool that made it (`oc apply`, `oc create`) owns its fields,
    so the update right after the import would fail as an apply conflict; with the annotation
    the stack takes the fields it sets, the rest keep their owners."""
    metadata = manifest["metadata"]
    annotations = {**metadata.get("annotations", {}), PATCH_FORCE_ANNOTATION: "true"}
    return {**manifest, "metadata": {**metadata, "annotations": annotations}}


@dataclass(frozen=True)
class TrainingNamespaceArgs:
    """namespace: its name. mode: create it, or adopt one that exists (imported, untouched).
    labels, annotations: of a created one. retain_on_delete: keep a created one (and every
    claim in it) on `pulumi destroy` and on replacement. protect: Pulumi's `protect` on a
    created one, so that an update or destroy that would delete it stops at preview."""

    namespace: str
    mode: Literal["create", "adopt"] = "create"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    retain_on_delete: bool = True
    protect: bool = False


class TrainingNamespace(pulumi.ComponentResource):
    """The training namespace. Deleting a namespace deletes every claim in it, so a created one
    is retained unless told otherwise (and then protected, if told so) and an adopted one always
    is retained. An adopted one is declared by name only and leaves what the platform writes
    into it alone."""

    namespace: k8s.core.v1.Namespace

    def __init__(
        self, name: str, args: TrainingNamespaceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:namespace:TrainingNamespace", name, None, opts)
        a = args
        child = pulumi.ResourceOptions(parent=self)
        if a.mode == "adopt":
            self.namespace = k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata=ObjectMetaArgs(name=a.namespace),
                opts=pulumi.ResourceOptions.merge(
                    child, adopted(None, a.namespace, NAMESPACE_PLATFORM_FIELDS)
                ),
            )
        else:
            self.namespace = k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata=ObjectMetaArgs(
                    name=a.namespace, labels=a.labels, annotations=a.annotations or None
                ),
                opts=pulumi.ResourceOptions.merge(
                    child,
                    pulumi.ResourceOptions(retain_on_delete=a.retain_on_delete, protect=a.protect),
                ),
            )
        self.register_outputs({"namespace": self.namespace.metadata.name})
