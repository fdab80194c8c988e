"""The stack's namespace and objects adopted from the cluster, on both platforms.

namespaceMode create | adopt (reference creates nothing); Pulumi's `import` option for adopted
objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs


def adopted(namespace: str | None, name: str) -> pulumi.ResourceOptions:
    """Import an existing object into the stack instead of creating it (pulumi-kubernetes
    >= 4.29 fails creating one that exists). The ID is "<namespace>/<name>", or "<name>" for
    cluster-scoped kinds (pulumi/pulumi-kubernetes provider/pkg/provider/util.go parseFqName).
    It existed before the stack, so `pulumi destroy` leaves it in place."""
    return pulumi.ResourceOptions(
        import_=f"{namespace}/{name}" if namespace else name, retain_on_delete=True
    )


@dataclass(frozen=True)
class TrainingNamespaceArgs:
    """namespace: its name. mode: create it, or adopt one that exists (imported, untouched).
    labels, annotations: of a created one. retain_on_delete: keep a created one (and every
    claim in it) on `pulumi destroy` and on replacement."""

    namespace: str
    mode: Literal["create", "adopt"] = "create"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    retain_on_delete: bool = True


class TrainingNamespace(pulumi.ComponentResource):
    """The training namespace. Deleting a namespace deletes every claim in it, so a created one
    is retained unless told otherwise and an adopted one always is. An adopted one carries no
    labels of ours: an import fails when the inputs differ from the live object."""

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
                opts=pulumi.ResourceOptions.merge(child, adopted(None, a.namespace)),
            )
        else:
            self.namespace = k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata=ObjectMetaArgs(
                    name=a.namespace, labels=a.labels, annotations=a.annotations or None
                ),
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(retain_on_delete=a.retain_on_delete)
                ),
            )
        self.register_outputs({"namespace": self.namespace.metadata.name})
