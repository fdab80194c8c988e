"""Custom resources as whole manifests (SCC, NetworkAttachmentDefinition, GKE Network ...).

`pulumi_kubernetes.apiextensions.CustomResource` only carries `spec`; some kinds (OpenShift's
SecurityContextConstraints) keep their fields at the top level. This registers any manifest with
the Kubernetes provider under the same `kubernetes:<apiVersion>:<kind>` type token.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pulumi

_PROVIDER_VERSION = version("pulumi_kubernetes")


class ManifestResource(pulumi.CustomResource):
    """One Kubernetes object given as its manifest (apiVersion, kind, metadata, fields)."""

    def __init__(
        self, resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
    ) -> None:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_PROVIDER_VERSION))
        super().__init__(
            f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}",
            resource_name,
            dict(manifest),
            opts,
        )
