#!/usr/bin/env bash
# Usage: . gdr-path.sh   (sourced by preflight.sh, which defines pass and fail)
#
# Whether this node has a GPUDirect RDMA path, the way NCCL registers GPU memory with the NIC:
# - nvidia-peermem, the legacy module (the GPU Operator loads it with driver.rdma.enabled): NCCL
#   looks for /sys/module/nvidia_peermem/version (NVIDIA/nccl 5067397
#   src/transport/net_ib/gdr.cc ncclIbGdrSupport; also the older nv_peer_mem's memory_peers);
# - DMA-BUF, which NVIDIA recommends: needs the open GPU kernel module and Linux 5.12 or newer
#   (docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-rdma.html, "Common
#   Prerequisites"; NVIDIA/cloud-native-docs 52dcb7b gpu-operator/gpu-operator-rdma.rst). The
#   open module names itself in /proc/driver/nvidia/version ("NVIDIA UNIX Open Kernel Module").
#   NCCL also needs the NIC driver's ibv_reg_dmabuf_mr, which only NCCL's own probe sees: the
#   fabric check shows what NCCL used (GDRDMA with verify.requireGdr).
# Without either, NCCL stages through host memory whatever NCCL_NET_GDR_LEVEL says.
#
# Environment: GDR_REQUIRED (true: no path is a failure, the stack's verify.requireGdr; else a
# warning), NCCL_NET_GDR_LEVEL (optional, named in the warning), SYSFS_ROOT, PROC_ROOT.
set -euo pipefail
: "${SYSFS_ROOT:?set SYSFS_ROOT before sourcing gdr-path.sh}"
PROC_ROOT=${PROC_ROOT:-/proc}
GDR_REQUIRED=${GDR_REQUIRED:-false}
# DMA-BUF's oldest kernel (the GPU Operator's prerequisites above).
readonly DMABUF_KERNEL_MAJOR=5 DMABUF_KERNEL_MINOR=12

warn() {
  echo "$PROG: warning: $*"
}

# Sets gdr_found to the path found ("nvidia-peermem loaded", "DMA-BUF (...)"), or gdr_missing
# to why there is none.
gdr_found="" gdr_missing=""
gdr_path() {
  local peer version release major minor
  for peer in module/nvidia_peermem kernel/mm/memory_peers/nv_mem kernel/mm/memory_peers/nv_mem_nc; do
    if [[ -e $SYSFS_ROOT/$peer/version ]]; then
      gdr_found="nvidia-peermem loaded ($SYSFS_ROOT/$peer/version)"
      return
    fi
  done
  # First lines, with bash alone (the training image's tools are not known).
  version="" release=""
  { IFS= read -r version <"$PROC_ROOT/driver/nvidia/version"; } 2>/dev/null || true
  { IFS= read -r release <"$PROC_ROOT/sys/kernel/osrelease"; } 2>/dev/null || true
  if [[ -z $version ]]; then
    gdr_missing="no nvidia-peermem, and $PROC_ROOT/driver/nvidia/version is unreadable (which GPU kernel module?)"
  elif [[ $version != *"Open Kernel Module"* ]]; then
    gdr_missing="no nvidia-peermem, and the GPU driver is not the open kernel module DMA-BUF needs ($version)"
  elif [[ ! $release =~ ^([0-9]+)\.([0-9]+) ]]; then
    gdr_missing="no nvidia-peermem, and the kernel release is unreadable ($PROC_ROOT/sys/kernel/osrelease: '$release')"
  else
    major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
    if ((major < DMABUF_KERNEL_MAJOR || (major == DMABUF_KERNEL_MAJOR && minor < DMABUF_KERNEL_MINOR))); then
      gdr_missing="no nvidia-peermem, and Linux $release is older than DMA-BUF's $DMABUF_KERNEL_MAJOR.$DMABUF_KERNEL_MINOR"
    else
      gdr_found="DMA-BUF (open GPU kernel module, Linux $release)"
    fi
  fi
}

check_gdr() {
  local fix
  gdr_path
  if [[ -n $gdr_found ]]; then
    pass "GPUDirect RDMA: $gdr_found"
    return
  fi
  fix="the GPU Operator's DMA-BUF path needs driver.kernelModuleType open (auto picks it on R570 and later) and Linux 5.12 or newer; its legacy path loads nvidia-peermem with driver.rdma.enabled true"
  if [[ $GDR_REQUIRED == true ]]; then
    fail "GPUDirect RDMA: $gdr_missing; verify.requireGdr is true: $fix, or set verify.requireGdr to false"
  else
    warn "GPUDirect RDMA: $gdr_missing; NCCL will stage through host memory${NCCL_NET_GDR_LEVEL:+ (NCCL_NET_GDR_LEVEL=$NCCL_NET_GDR_LEVEL has no effect)}; $fix"
  fi
}
