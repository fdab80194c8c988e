"""gpu-cluster: multi-node GPU training clusters on OpenShift or GKE, from stack config."""

import pulumi

from gpu_cluster.components.select import build_platform
from gpu_cluster.components.stack_config import read_settings
from gpu_cluster.config.messages import ConfigError

try:
    settings = read_settings()
except ConfigError as exc:
    # Stops the program before any resource is registered.
    raise pulumi.RunError(str(exc)) from None

platform = build_platform(settings)
for key, value in platform.outputs.items():
    pulumi.export(key, value)
