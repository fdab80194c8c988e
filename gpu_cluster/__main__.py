"""`python -m gpu_cluster`: the `gpu-cluster` command (gpu_cluster.offline.cli)."""

from gpu_cluster.offline.cli import run_cli

run_cli()
