"""The public API: what a Pulumi program of your own may import from this package.

Every name here keeps its meaning within a minor version (CHANGELOG.md lists each change while
the version is 0.x); the modules behind it may move. Nothing inside the package imports this
module (tests/test_layers.py), so it is only ever the users' view. examples/a3-mega-pool uses
it alone; docs/api.md says what each name is for.
"""

from gpu_cluster.components.gcp_vpc import GpuVpcs, GpuVpcsArgs
from gpu_cluster.components.gke import GkePlatform, gke_placement
from gpu_cluster.components.gke_cluster import GkeCluster, GkeClusterArgs
from gpu_cluster.components.gke_storage import GkeStorageClass, GkeStorageClassArgs
from gpu_cluster.components.gpu_pool import GpuNodePool, GpuNodePoolArgs
from gpu_cluster.components.gpudirect_nodes import GpuDirectNodes, GpuDirectNodesArgs, GpuNicNetwork
from gpu_cluster.components.image_pre_pull import ImagePrePull, ImagePrePullArgs
from gpu_cluster.components.namespace import TrainingNamespace, TrainingNamespaceArgs
from gpu_cluster.components.node_identity import NodeIdentity, NodeIdentityArgs
from gpu_cluster.components.openshift import OpenShiftPlatform
from gpu_cluster.components.rdma_networks import RdmaNetworks, RdmaNetworksArgs
from gpu_cluster.components.select import build_platform
from gpu_cluster.components.shared_args import labels, workload_args
from gpu_cluster.components.training_access import TrainingAccess, TrainingAccessArgs
from gpu_cluster.components.training_storage import TrainingStorage, TrainingStorageArgs
from gpu_cluster.components.workload import TrainingWorkload, TrainingWorkloadArgs
from gpu_cluster.config.gke import gpudirect_release
from gpu_cluster.config.loading import validate_settings
from gpu_cluster.config.schema import Settings
from gpu_cluster.plan.netmodes import pod_networking

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
