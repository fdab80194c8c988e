"""The public API: what a Pulumi program of your own may import from this package.

Every name here keeps its meaning within a minor version (CHANGELOG.md lists each change while
the version is 0.x); the modules behind it may move. Nothing inside the package imports this
module (tests/test_layers.py), so it is only ever the users' view. examples/a3-mega-pool uses
it alone; docs/api.md says what each name is for.
"""

import importlib
from typing import TYPE_CHECKING

from gpu_cluster.components.gcp_sdk import gcp_sdk
from gpu_cluster.components.gke_storage import GkeStorageClass, GkeStorageClassArgs
from gpu_cluster.components.gpudirect_nodes import GpuDirectNodes, GpuDirectNodesArgs, GpuNicNetwork
from gpu_cluster.components.image_pre_pull import ImagePrePull, ImagePrePullArgs
from gpu_cluster.components.namespace import TrainingNamespace, TrainingNamespaceArgs
from gpu_cluster.components.openshift import OpenShiftPlatform
from gpu_cluster.components.rdma_networks import RdmaNetworks, RdmaNetworksArgs
from gpu_cluster.components.select import build_platform
from gpu_cluster.components.shared_args import labels, workload_args
from gpu_cluster.components.training_access import TrainingAccess, TrainingAccessArgs
from gpu_cluster.components.training_storage import TrainingStorage, TrainingStorageArgs
from gpu_cluster.components.workload import TrainingWorkload, TrainingWorkloadArgs
from gpu_cluster.config.loading import validate_settings
from gpu_cluster.config.netmodes.gpudirect_tcp import gpudirect_release
from gpu_cluster.config.schema import Settings
from gpu_cluster.plan.netmodes import pod_networking

if TYPE_CHECKING:
    from gpu_cluster.components.gcp_vpc import GpuVpcs, GpuVpcsArgs
    from gpu_cluster.components.gke import GkePlatform, gke_placement
    from gpu_cluster.components.gke_cluster import GkeCluster, GkeClusterArgs
    from gpu_cluster.components.gpu_pool import GpuNodePool, GpuNodePoolArgs
    from gpu_cluster.components.node_identity import NodeIdentity, NodeIdentityArgs

# The names whose modules create GCP resources, so import pulumi-gcp: an optional dependency
# (the `gke` extra, components/gcp_sdk.py). Each is imported when first used, so a program
# without pulumi-gcp imports every other name; using one of these there raises GcpSdkMissingError
# (an ImportError) naming the install command.
_NEEDS_GCP_SDK = {
    "GpuVpcs": "gcp_vpc",
    "GpuVpcsArgs": "gcp_vpc",
    "GkePlatform": "gke",
    "gke_placement": "gke",
    "GkeCluster": "gke_cluster",
    "GkeClusterArgs": "gke_cluster",
    "GpuNodePool": "gpu_pool",
    "GpuNodePoolArgs": "gpu_pool",
    "NodeIdentity": "node_identity",
    "NodeIdentityArgs": "node_identity",
}


def __getattr__(name: str) -> object:
    module = _NEEDS_GCP_SDK.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    gcp_sdk()
    value: object = getattr(importlib.import_module(f"gpu_cluster.components.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "GkeCluster",
    "GkeClusterArgs",
    "GkePlatform",
    "GkeStorageClass",
    "GkeStorageClassArgs",
    "GpuDirectNodes",
    "GpuDirectNodesArgs",
    "GpuNicNetwork",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "GpuVpcs",
    "GpuVpcsArgs",
    "ImagePrePull",
    "ImagePrePullArgs",
    "NodeIdentity",
    "NodeIdentityArgs",
    "OpenShiftPlatform",
    "RdmaNetworks",
    "RdmaNetworksArgs",
    "Settings",
    "TrainingAccess",
    "TrainingAccessArgs",
    "TrainingNamespace",
    "TrainingNamespaceArgs",
    "TrainingStorage",
    "TrainingStorageArgs",
    "TrainingWorkload",
    "TrainingWorkloadArgs",
    "build_platform",
    "gke_placement",
    "gpudirect_release",
    "labels",
    "pod_networking",
    "validate_settings",
    "workload_args",
]
