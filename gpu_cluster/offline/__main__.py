"""`python -m gpu_cluster.offline`: the offline render CLI (gpu_cluster.offline.render)."""

from gpu_cluster.offline.render import run_cli

run_cli()
