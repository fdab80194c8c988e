"""The GKE GPU machine types the program deploys: one GpuMachine record each, in MACHINES, which
every other place reads (the schema's allowed gcp.machineType values and their order, the rules,
the node pool, the VPCs, the fabric floor, the real tier's fake nodes). docs/development.md,
"Add a machine type", says how to add one.

Not here: the zones that offer each machine, which the dated catalog keeps with the rest of
Compute Engine's listing it is refreshed from (gcp_catalog.GPU_MACHINE_ZONES, checked as of
CATALOG_DATE); and the GPU NICs, whose count the network mode decides (a TCPX(O) release's
nic_count, gIB's RDMA_NIC_COUNT), not the machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gpu_cluster.facts.gcp_network import A3_VPC_MTU, RDMA_VPC_MTU
from gpu_cluster.facts.gpudirect import GIB_POD_DIR

# How the GPU pool gets its capacity (GcpSettings.provisioning).
Provisioning = Literal["on-demand", "spot", "reservation", "flex-start"]

# Capacity each machine type is offered with. A3 Ultra and A4 come only through reservations
# (whole, a block or sub-block, or a calendar-mode future reservation), flex-start or Spot, never
# on demand: docs.cloud.google.com/ai-hypercomputer/docs/consumption-models (consulted
# 2026-11-23) lists no on-demand option for them, and every GoogleCloudPlatform/cluster-toolkit
# blueprint for them (examples/gke-a4, gke-a3-ultragpu, gke-consumption-options; 1047080)
# consumes a reservation or flex-start. A3 Mega and A3 High are also sold on demand.
_SOLD_ON_DEMAND: tuple[Provisioning, ...] = ("on-demand", "spot", "reservation", "flex-start")
_NOT_ON_DEMAND: tuple[Provisioning, ...] = ("flex-start", "reservation", "spot")

# The system pool's machine and boot disk where the GPU machine's blueprint sizes it itself:
# cluster-toolkit's A3 Ultra and A4 blueprints run it on e2-standard-16 with 200 GB
# (examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml and examples/gke-a4/gke-a4.yaml,
# system_node_pool_machine_type and system_node_pool_disk_size_gb, 1047080); the A3 Mega and
# A3 High blueprints keep the module's defaults (SystemPoolSettings).
_BLUEPRINT_SYSTEM_POOL = {"machineType": "e2-standard-16", "diskSizeGb": 200}

# A3 Ultra node pools must boot from hyperdisk-balanced (docs.cloud.google.com/ai-hypercomputer/
# docs/create/gke-ai-hypercompute); AI-Hypercomputer/xpk sets it for A4 too.
_RDMA_BOOT_DISK = "hyperdisk-balanced"


@dataclass(frozen=True)
class GpuMachine:
    """One GPU machine type's facts, each field's source beside it (per-record values that have
    their own source say so at the record)."""

    # The program's name for the GKE node pool (and its nodes' cloud.google.com/gke-nodepool
    # label): a DNS label, not a vendor fact. Renaming it replaces the pool.
    pool_name: str
    # GPUs, vCPUs and memory (GB) per machine: cloud.google.com/compute/docs/
    # accelerator-optimized-machines (A3 Mega/High 208 vCPU 1,872 GB; A3 Ultra 224 vCPU
    # 2,952 GB; A4 224 vCPU 3,968 GB).
    gpus: int
    vcpus: int
    memory_gb: int
    # GKE accelerator type (cloud.google.com/kubernetes-engine/docs/how-to/gpus; the
    # cluster-toolkit gke-a3-megagpu, gke-a3-highgpu, gke-a3-ultragpu and gke-a4 blueprints'
    # accelerator_type).
    accelerator: str
    # Local SSDs (375 GiB each) every machine comes with, given to the node as its ephemeral
    # storage (kubelet and containerd root: emptyDir volumes, image layers, logs) instead of the
    # boot disk: GoogleCloudPlatform/cluster-toolkit modules/compute/gke-node-pool/
    # disk_definitions.tf `local_ssd_machines` (local_ssd_count_ephemeral_storage) at 1047080.
    local_ssds: int
    # The GPUDirect mode GKE runs on it (cloud.google.com/kubernetes-engine/docs/how-to/
    # gpu-bandwidth-gpudirect-tcpx: TCPXO on A3 Mega, TCPX on A3 High; docs.cloud.google.com/
    # ai-hypercomputer/docs/create/gke-ai-hypercompute: GPUDirect RDMA on A3 Ultra and A4).
    # The networkMode value of a GKE plug-in (gpu_cluster/config/netmodes/, which runs it on the
    # machines naming it; tests/test_netmodes.py holds every record to one).
    network_mode: str
    # MTU of every VPC the cluster creates for it (facts/gcp_network.py gives each value's source).
    vpc_mtu: int
    # Capacity Google sells it with, in the order a refusal lists them (_SOLD_ON_DEMAND above).
    provisioning: tuple[Provisioning, ...]
    # The fabric check's floor, GB/s: the all_gather bus bandwidth Google's own NCCL health check
    # holds the machine to, GoogleCloudPlatform/cluster-health-scanner deploy/helm/health_checks/
    # nccl_healthcheck/<file>.yaml BANDWIDTH_THRESHOLD at 81c525d (plan/verify.py says what it
    # measures; tests/vendor/cluster_health_scanner.yaml holds the values).
    busbw_floor_gbps: float
    # Boot disk type of its nodes; None: GKE's default.
    boot_disk_type: str | None = None
    # System pool keys (stack-config spelling) its blueprint sets; the stack's own win.
    system_pool: dict[str, Any] = field(default_factory=dict)
    # rdma: the oldest GKE version with GPUDirect RDMA on it (docs.cloud.google.com/
    # ai-hypercomputer/docs/create/gke-ai-hypercompute, 2026-04-06). The driver branch each needs
    # (R550 A3 Ultra, R570 A4, same page) is GKE's default from 1.31.5-gke.1169000 and
    # 1.32.1-gke.1729000, older than any minor in standard support; the pool asks for LATEST.
    rdma_min_gke: str | None = None
    # rdma: what Google's GKE workloads for it export after sourcing gIB's set_nccl_env.sh.
    after_nccl_script: tuple[tuple[str, str], ...] = ()
    # gcsfuse option a checkpoint bucket's mount adds on it (facts/gcs.py CHECKPOINT_MOUNT_OPTIONS),
    # or None.
    gcsfuse_checkpoint_option: str | None = None


MACHINES: dict[str, GpuMachine] = {
    "a3-megagpu-8g": GpuMachine(
        pool_name="a3mega",
        gpus=8,
        vcpus=208,
        memory_gb=1872,
        accelerator="nvidia-h100-mega-80gb",
        local_ssds=16,
        network_mode="tcpxo",
        vpc_mtu=A3_VPC_MTU,
        provisioning=_SOLD_ON_DEMAND,
        busbw_floor_gbps=150.0,  # a3plus.yaml
    ),
    "a3-highgpu-8g": GpuMachine(
        pool_name="a3high",
        gpus=8,
        vcpus=208,
        memory_gb=1872,
        accelerator="nvidia-h100-80gb",
        local_ssds=16,
        network_mode="tcpx",
        vpc_mtu=A3_VPC_MTU,
        provisioning=_SOLD_ON_DEMAND,
        busbw_floor_gbps=60.0,  # a3.yaml
    ),
    "a3-ultragpu-8g": GpuMachine(
        pool_name="a3ultra",
        gpus=8,  # 8 x H200
        vcpus=224,
        memory_gb=2952,
        accelerator="nvidia-h200-141gb",
        local_ssds=32,
        network_mode="rdma",
        vpc_mtu=RDMA_VPC_MTU,
        provisioning=_NOT_ON_DEMAND,
        busbw_floor_gbps=250.0,  # a3ultra.yaml
        boot_disk_type=_RDMA_BOOT_DISK,
        system_pool=_BLUEPRINT_SYSTEM_POOL,
        rdma_min_gke="1.31.4-gke.1183000",
        # AI-Hypercomputer/gpu-recipes src/helm-charts/a3ultra/jobset/templates/
        # workload-jobset.yaml (2e1fd5e) sources the script and exports nothing after it.
        after_nccl_script=(),
    ),
    "a4-highgpu-8g": GpuMachine(
        pool_name="a4",
        gpus=8,  # 8 x B200
        vcpus=224,
        memory_gb=3968,
        accelerator="nvidia-b200",
        local_ssds=32,
        network_mode="rdma",
        vpc_mtu=RDMA_VPC_MTU,
        provisioning=_NOT_ON_DEMAND,
        busbw_floor_gbps=250.0,  # a4.yaml
        boot_disk_type=_RDMA_BOOT_DISK,
        system_pool=_BLUEPRINT_SYSTEM_POOL,
        rdma_min_gke="1.32.2-gke.1475000",
        # gpu-recipes src/helm-charts/a4/jobset/templates/workload-jobset.yaml (2e1fd5e, last
        # changed 280f358): bootstrap over both gVNICs and A4's own tuner file, after the script.
        after_nccl_script=(
            ("NCCL_SOCKET_IFNAME", "eth0,eth1"),
            ("NCCL_TUNER_CONFIG_PATH", f"{GIB_POD_DIR}/configs/tuner_config_a4.txtpb"),
        ),
        # The gcs-fuse chart's workaround on checkpoints: gcsfuse up to 3.5.0 does not count A4
        # as a high-performance machine, so streaming writes fall back to staged writes unless
        # told the machine is A3 High (AI-Hypercomputer/gpu-recipes src/helm-charts/storage/
        # gcs-fuse/templates/pv.yaml, 226cd3a, 2026-04-03). GKE's managed driver does not say
        # which gcsfuse each GKE patch ships (GoogleCloudPlatform/gcs-fuse-csi-driver
        # docs/releases.md, 5fcdc04), so it stays for A4 nodes; gcsfuse that knows A4 takes it
        # as a high-performance machine either way.
        gcsfuse_checkpoint_option="machine-type:a3-highgpu-8g",
    ),
}


def machines_for(mode: str) -> tuple[str, ...]:
    """The machine types GKE runs the GPUDirect `mode` on, in MACHINES' order (none for tcp)."""
    return tuple(name for name, m in MACHINES.items() if m.network_mode == mode)
