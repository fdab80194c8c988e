"""gpu-cluster: settings, pure decisions and the Pulumi components that build the cluster."""
