"""The stack's namespace and objects adopted from the cluster, on both platforms.

namespaceMode create | adopt | reference; Pulumi's `import` option for adopted objects.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from gpu_cluster.components.workload import labels, retention_annotations
from gpu_cluster.config.settings import Settings


def adopted(namespace: str | None, name: str) -> pulumi.ResourceOptions:
    """Import an existing object into the stack instead of creating it (pulumi-kubernetes
    >= 4.29 fails creating one that exists). The ID is "<namespace>/<name>", or "<name>" for
    cluster-scoped kinds (pulumi/pulumi-kubernetes provider/pkg/provider/util.go parseFqName).
    It existed before the stack, so `pulumi destroy` leaves it in place."""
    return pulumi.ResourceOptions(
        import_=f"{namespace}/{name}" if namespace else name, retain_on_delete=True
    )


def managed_namespace(
    resource_name: str, s: Settings, opts: pulumi.ResourceOptions
) -> k8s.core.v1.Namespace | None:
    """The stack's namespace unless it is only referenced (namespaceMode: reference).

    Deleting a namespace deletes every claim in it, so a created one is retained on
    `pulumi destroy` and on replacement (a rename) unless storage.retainOnDelete is false;
    an adopted one is always retained. An adopted one carries no labels of ours: an import
    fails when the inputs differ from the live object."""
    if s.namespace_mode == "reference":
        return None
    if s.namespace_mode == "adopt":
        return k8s.core.v1.Namespace(
            resource_name,
            metadata=ObjectMetaArgs(name=s.namespace),
            opts=pulumi.ResourceOptions.merge(opts, adopted(None, s.namespace)),
        )
    return k8s.core.v1.Namespace(
        resource_name,
        metadata=ObjectMetaArgs(
            name=s.namespace, labels=labels(s), annotations=retention_annotations(s) or None
        ),
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(retain_on_delete=s.storage.retain_on_delete)
        ),
    )
