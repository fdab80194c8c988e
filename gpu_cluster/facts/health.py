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

from typing import Final

RESULT_LABEL = "aiinfra/{}-healthcheck-result"
PASS = "pass"
TIME_LABEL = "aiinfra/{}-healthcheck-runtime-sec"
# The taint a failed check leaves: TAINT_KEY.format(check)=TAINT_VALUE:TAINT_EFFECT
# (cluster-health-scanner 81c525d src/gpu_healthcheck/gpu_healthcheck.py TAINT_KEY, TAINT_VALUE,
# TAINT_EFFECT).
TAINT_KEY = "aiinfra/{}-healthcheck"
TAINT_VALUE = "failed"
TAINT_EFFECT = "NoSchedule"
FAIL = "fail"

# The GPU check the stack's own health runner runs (workload.queue.healthGate.runner): DCGM
# diagnostics in NVIDIA's DCGM image, the release the GPU Operator pins for its own host engine
# (NVIDIA/gpu-operator a22dbf6 deployments/gpu-operator/values.yaml dcgm.version), so the
# check's dcgmi speaks that host engine's release. DCGM supports a minor release for a year
# (NVIDIA/DCGM 72fa3fe docs/support_EOL.md): 4.6.0 came out 2026-07-06 (tag v4.6.0);
# cluster-health-scanner's 4.3.1 (81c525d deploy/slurm/dcgmi-diag.sh) is from 2025-08.
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
# The GPU Operator's own DCGM host engine (ClusterPolicy dcgm.enabled): the DaemonSet
# nvidia-dcgm runs nv-hostengine privileged on each GPU node, and the Service nvidia-dcgm, port
# 5555, with internalTrafficPolicy Local, sends each client to the host engine of its own node
# (NVIDIA/gpu-operator a22dbf6 assets/state-dcgm/0400_dcgm.yml, 0500_service.yaml). On
# OpenShift the operator's namespace is nvidia-gpu-operator (its OLM bundle's
# operatorframework.io/suggested-namespace) and the bundle's ClusterPolicy enables dcgm
# (bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml alm-examples); its Helm
# chart does not by default (values.yaml dcgm.enabled false: dcgm-exporter then embeds one).
GPU_OPERATOR_DCGM_SERVICE = "nvidia-dcgm"
GPU_OPERATOR_OPENSHIFT_NAMESPACE = "nvidia-gpu-operator"
GPU_OPERATOR_DCGM_HOST = f"{GPU_OPERATOR_DCGM_SERVICE}.{GPU_OPERATOR_OPENSHIFT_NAMESPACE}.svc"
# DCGM's host engine port, which dcgmi uses when --host names none (NVIDIA/DCGM 72fa3fe
# dcgmlib/dcgm_structs.h DCGM_HE_PORT_NUMBER; the operator's DCGMDefaultPort, a22dbf6
# controllers/object_controls.go).
DCGM_PORT = 5555
# The check starts a host engine of its own in its pod instead (GKE, or a cluster without the
# operator's): unprivileged, so "portions of diagnostics" that "can require root" may not run
# (docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/nv-hostengine.html).
OWN_HOST_ENGINE = "own"
# cluster-health-scanner's default run level (81c525d deploy/helm/health_checks/gpu_healthcheck/
# values.yaml R_LEVEL).
DCGM_LEVEL: Final = 2
# How long a level normally runs, in minutes: 1 seconds, 2 about two, 3 about 15, 4 longer
# (docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html,
# "--run"; 4 has no figure there, 60 assumed).
DCGM_LEVEL_MINUTES = {1: 1, 2: 2, 3: 15, 4: 60}
# The checks the stack's runner runs, by cluster-health-scanner's names: DCGM diagnostics on
# one node, and the all_gather bandwidth between two nodes (its NCCL check's NHOSTS "2",
# 81c525d deploy/helm/health_checks/nccl_healthcheck/*.yaml).
GPU_CHECK = "gpu"
PAIR_CHECK = "nccl"
RUNNER_CHECKS = (GPU_CHECK, PAIR_CHECK)
# How long torchrun's c10d rendezvous waits for every node to join before it gives up: the
# pairwise check's first pod waits so long for its partner (pytorch torch/distributed/elastic/
# rendezvous/dynamic_rendezvous.py, RendezvousTimeout's default join timeout, 600 s).
RENDEZVOUS_JOIN_MINUTES = 10
