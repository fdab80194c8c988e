"""The training workload, written once for both platforms and every workload kind.

args: what it is made of. pod_template: the pods. claims: their user-data claims.
shared_objects: the scripts ConfigMap, headless Service, NetworkPolicy and Secrets. kind: the
seam a controller object plugs into; stateful_set: the StatefulSet kind. training_workload:
the TrainingWorkload component composing them.
"""

from gpu_cluster.components.workload.args import TrainingWorkloadArgs
from gpu_cluster.components.workload.training_workload import TrainingWorkload

__all__ = ["TrainingWorkload", "TrainingWorkloadArgs"]
