"""`python -m gpu_cluster.offline`: the offline render's older command (gpu_cluster.offline.cli)."""

from gpu_cluster.offline.cli import offline_main, run_cli

run_cli(offline_main)
