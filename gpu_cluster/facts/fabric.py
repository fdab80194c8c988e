"""Line rates of the fabrics the program configures, GB/s (bus bandwidth cannot exceed them)."""

from __future__ import annotations

# Fastest line rate a GPU NIC reaches today, GB/s: 400 Gb/s ConnectX-7 (NVIDIA ConnectX-7
# datasheet); A3 Mega 8 x 200 Gb/s, A3 High 4 x 200 Gb/s GPU NICs
# (cloud.google.com/compute/docs/gpus/gpudirect). Bus bandwidth cannot exceed the fabric's.
NIC_LINE_RATE_GBPS = 50.0
# The GPU NICs of each GKE GPUDirect mode's machines, GB/s: A3 Mega (TCPXO) 8 x 200 Gb/s, A3 High
# (TCPX) 4 x 200 Gb/s (cloud.google.com/compute/docs/gpus/gpudirect); A3 Ultra / A4 (gIB RDMA)
# 8 x 400 Gb/s CX-7 RoCE NICs, 3,200 Gb/s per VM (cloud.google.com/compute/docs/gpus/
# gpu-network-bandwidth).
TCPXO_FABRIC_GBPS = 200.0
TCPX_FABRIC_GBPS = 100.0
RDMA_FABRIC_GBPS = 400.0
# Fastest link any GPU has: fifth-generation NVLink, 18 links of 100 GB/s, 1.8 TB/s per
# Blackwell GPU (nvidia.com/en-us/data-center/nvlink); no fabric's bus bandwidth exceeds it.
GPU_LINK_MAX_GBPS = 1800.0
