"""What node health checkers leave on a node: the labels the node health gate
(workload.queue.healthGate) and the training pods' placement read.

cluster-health-scanner labels every node a check ran on with its result and when it ran (Unix
seconds): GoogleCloudPlatform/cluster-health-scanner 81c525d src/gpu_healthcheck/
gpu_healthcheck.py (_RESULT_LABEL_KEY, HEALTHCHECK_TIME_LABEL_KEY), src/health_runner/
nccl_runner.py (NCCL_RESULT_KEY), src/neper_healthcheck/neper_runner.py. scripts/
node_health_gate.py keeps its own copy (it runs alone in its pod); tests/test_node_health_gate.py
holds both to tests/vendor/cluster_health_scanner.yaml.
"""

from __future__ import annotations

RESULT_LABEL = "aiinfra/{}-healthcheck-result"
PASS = "pass"
