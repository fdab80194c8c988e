#!/usr/bin/env bash
# Usage: preflight.sh
#
# Checks, inside the training container and before training starts, what would otherwise fail
# later and less clearly: GPU count, /dev/shm size, DeepSpeed's version, memlock / CAP_IPC_LOCK,
# RDMA links, MTUs and verbs devices, the GPUDirect RDMA path (gdr-path.sh), and the NCCL env
# file of the detect-rdma init container. Runs every check, prints one
# line per problem on stderr (what is wrong and what to do), then exits 1 if any failed, or prints
# `preflight: OK (<n> checks)` and exits 0. Passed checks are listed on stdout. Reads only.
#
# Environment:
#   GPUS_PER_NODE    required  GPUs this pod must see. Counted with `nvidia-smi -L` when
#                              nvidia-smi is on PATH, else as $DEV_ROOT/nvidia<N> device nodes
#   NVIDIA_SMI_TIMEOUT_SECONDS optional  how long `nvidia-smi -L` may take; default 60 (it
#                              answers in seconds; with persistence mode off the driver first
#                              initialises every GPU)
#   SHM_MIN_BYTES    optional  minimum size of SHM_PATH, bytes or with suffix Ki/Mi/Gi/Ti;
#                              unset/empty = skip. Measured with `df -B1 --output=size` (tests
#                              put a fake df on PATH)
#   SHM_PATH         optional  default /dev/shm
#   RDMA_INTERFACES  optional  comma list of RDMA netdevs, e.g. net1,net2,net3,net4; unset/empty
#                              (tcp and GKE GPUDirect modes) = skip memlock, RDMA and env-file checks
#   RDMA_HCAS        optional  as for detect-rdma.sh: RDMA devices paired with RDMA_INTERFACES by
#                              position; empty (or an empty entry) = find from sysfs
#   RDMA_GID_INDEX   optional  as for detect-rdma.sh; auto (default) means the NCCL env file is
#                              required (also when RDMA_HCAS leaves an interface to detection)
#   MEMLOCK_MIN_KB   optional  unlimited (default) | <KiB>: the `ulimit -l` needed when the
#                              container lacks CAP_IPC_LOCK. NCCL pins buffers per channel, peer
#                              and NIC, so no small fixed limit is safe: give IPC_LOCK or make
#                              memlock unlimited (the usual RDMA advice).
#                              With CAP_IPC_LOCK the kernel ignores the limit for verbs memory
#                              registration, so the check passes whatever the limit
#   MEMLOCK_STRATEGY optional  the stack's rdma.memlock (root-ipc-lock | machineconfig |
#                              preconfigured): the memlock failure names its fix
#   MEMLOCK_MACHINE_CONFIG optional  with machineconfig: the MachineConfig's name, for that fix
#   RDMA_MTU         optional  MTU every RDMA interface must have (the stack's rdma.mtu); unset/empty
#                              = not checked, each interface's MTU only reported (it is the node's:
#                              the SriovNetworkNodePolicy's, or a macvlan parent's)
#   GDR_REQUIRED     optional  true = a node without a GPUDirect RDMA path (DMA-BUF or
#                              nvidia-peermem) fails (verify.requireGdr); else it is a warning
#   PREFLIGHT_LAUNCHER optional  deepspeed = also check DeepSpeed >= 0.14.5 (--no_ssh) is installed
#   PYTHON_BIN       optional  default python3 (asks it for DeepSpeed's version)
#   IP_BIN           optional  default ip (iproute2): the RDMA interfaces' IPv4 addresses;
#                              without it read from PROC_ROOT/net/fib_trie and route
#   NCCL_ENV_FILE    optional  default /var/run/gpu-cluster/nccl.env
#   SYSFS_ROOT       optional  default /sys  (tests point these three at fake trees)
#   DEV_ROOT         optional  default /dev
#   PROC_ROOT        optional  default /proc (reads $PROC_ROOT/self/status for CapEff, and
#                              $PROC_ROOT/net/* without iproute2)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# Functions below run inside $(...); without this, errexit would be off there.
shopt -s inherit_errexit

readonly PROG=preflight
SYSFS_ROOT=${SYSFS_ROOT:-/sys}
# shellcheck source=rdma-sysfs.sh
. "$(dirname "$0")/rdma-sysfs.sh"
# shellcheck source=gdr-path.sh
. "$(dirname "$0")/gdr-path.sh"
DEV_ROOT=${DEV_ROOT:-/dev}
PROC_ROOT=${PROC_ROOT:-/proc}
SHM_PATH=${SHM_PATH:-/dev/shm}
NVIDIA_SMI_TIMEOUT_SECONDS=${NVIDIA_SMI_TIMEOUT_SECONDS:-60}
SHM_MIN_BYTES=${SHM_MIN_BYTES:-}
RDMA_INTERFACES=${RDMA_INTERFACES:-}
RDMA_HCAS=${RDMA_HCAS:-}
RDMA_GID_INDEX=${RDMA_GID_INDEX:-auto}
MEMLOCK_MIN_KB=${MEMLOCK_MIN_KB:-unlimited}
MEMLOCK_STRATEGY=${MEMLOCK_STRATEGY:-}
MEMLOCK_MACHINE_CONFIG=${MEMLOCK_MACHINE_CONFIG:-}
RDMA_MTU=${RDMA_MTU:-}
PREFLIGHT_LAUNCHER=${PREFLIGHT_LAUNCHER:-}
PYTHON_BIN=${PYTHON_BIN:-python3}
# DeepSpeed's launcher got --no_ssh in v0.14.5 (deepspeedai/DeepSpeed PR #5728, acbaca3).
readonly DEEPSPEED_MIN_VERSION=0.14.5
NCCL_ENV_FILE=${NCCL_ENV_FILE:-/var/run/gpu-cluster/nccl.env}

# CAP_IPC_LOCK is capability number 14 (linux/capability.h).
readonly CAP_IPC_LOCK_BIT=14

checks=0
failures=0

pass() {
  checks=$((checks + 1))
  echo "$PROG: ok: $*"
}

fail() {
  checks=$((checks + 1))
  failures=$((failures + 1))
  echo "$PROG: FAIL: $*" >&2
}

# What was found but not checked: no check, no failure.
note() {
  echo "$PROG: note: $*"
}

# Bytes in binary units, e.g. 67108864 -> "64 MiB", 1610612736 -> "1.5 GiB".
human() {
  local bytes=$1 units=(B KiB MiB GiB TiB PiB) i=0 unit whole tenth
  while ((i < ${#units[@]} - 1 && bytes >= 1024 ** (i + 1))); do
    i=$((i + 1))
  done
  unit=$((1024 ** i))
  whole=$((bytes / unit))
  tenth=$((bytes % unit * 10 / unit))
  if ((tenth > 0)); then
    echo "$whole.$tenth ${units[i]}"
  else
    echo "$whole ${units[i]}"
  fi
}

# "64Gi" -> 68719476736; plain integers are bytes. Fails on anything else.
to_bytes() {
  [[ $1 =~ ^([0-9]+)(Ki|Mi|Gi|Ti)?$ ]] || return 1
  local n=$((10#${BASH_REMATCH[1]}))
  case ${BASH_REMATCH[2]} in
    Ki) n=$((n << 10)) ;;
    Mi) n=$((n << 20)) ;;
    Gi) n=$((n << 30)) ;;
    Ti) n=$((n << 40)) ;;
  esac
  echo "$n"
}

# --- GPUs -------------------------------------------------------------------------------------
check_gpus() {
  if [[ ! ${GPUS_PER_NODE:-} =~ ^[1-9][0-9]*$ ]]; then
    fail "GPUs: GPUS_PER_NODE='${GPUS_PER_NODE:-}' is not a positive integer; set it to the GPUs each pod requests"
    return
  fi
  local count=0 source out rc=0 line dev
  if command -v nvidia-smi >/dev/null; then
    source="nvidia-smi -L"
    # A GPU fallen off the bus can leave nvidia-smi waiting on the driver for ever.
    out=$(timeout --kill-after=5 "$NVIDIA_SMI_TIMEOUT_SECONDS" nvidia-smi -L 2>&1) || rc=$?
    if ((rc == 124 || rc == 137)); then
      fail "GPUs: 'nvidia-smi -L' did not answer within ${NVIDIA_SMI_TIMEOUT_SECONDS}s (stopped); a GPU may have fallen off the bus (Xid 79 in the node's dmesg) or the driver hangs: drain the node and check its GPUs"
      return
    fi
    if ((rc != 0)); then
      fail "GPUs: 'nvidia-smi -L' failed (exit $rc): ${out%%$'\n'*}; is the NVIDIA driver/container toolkit working on this node?"
      return
    fi
    # Count "GPU <i>: ..." lines only: MIG devices add indented "MIG ..." lines under their GPU.
    while IFS= read -r line; do
      [[ $line =~ ^GPU\ [0-9]+: ]] && count=$((count + 1))
    done <<<"$out"
  else
    source="$DEV_ROOT/nvidia<N> device nodes"
    # nvidia0, nvidia1, ...; the glob leaves out nvidiactl, nvidia-uvm, nvidia-caps.
    for dev in "$DEV_ROOT"/nvidia[0-9]*; do
      [[ -e $dev ]] && count=$((count + 1))
    done
  fi
  if ((count == GPUS_PER_NODE)); then
    pass "GPUs: $count visible ($source)"
  else
    fail "GPUs: $count visible, GPUS_PER_NODE=$GPUS_PER_NODE ($source); the pod's nvidia.com/gpu limit must equal GPUS_PER_NODE, and every GPU must be healthy on the node (nvidia-smi, Xid errors in dmesg)"
  fi
}

# --- /dev/shm ---------------------------------------------------------------------------------
check_shm() {
  [[ -n $SHM_MIN_BYTES ]] || return 0
  local min size out rc=0
  if ! min=$(to_bytes "$SHM_MIN_BYTES"); then
    fail "$SHM_PATH: SHM_MIN_BYTES='$SHM_MIN_BYTES' is not a byte count (e.g. 34359738368 or 32Gi)"
    return
  fi
  out=$(df -B1 --output=size "$SHM_PATH" 2>&1) || rc=$?
  size=${out##*$'\n'}
  size=${size//[[:space:]]/}
  if ((rc != 0)) || [[ ! $size =~ ^[0-9]+$ ]]; then
    fail "$SHM_PATH: cannot measure its size (df -B1 --output=size: ${out//$'\n'/ }); the pod's dshm memory volume is missing"
    return
  fi
  if ((size >= min)); then
    pass "$SHM_PATH: $(human "$size") >= $(human "$min")"
  else
    fail "$SHM_PATH: $(human "$size") < $(human "$min"); the pod's dshm memory volume is missing or too small (pod.shm_size)"
  fi
}

# --- memlock ----------------------------------------------------------------------------------
# Prints "yes", "no" or "unknown (<why>)".
has_ipc_lock() {
  local line capeff=""
  if [[ ! -r $PROC_ROOT/self/status ]]; then
    echo "unknown ($PROC_ROOT/self/status not readable)"
    return
  fi
  while IFS= read -r line; do
    if [[ $line =~ ^CapEff:[[:space:]]*([0-9a-fA-F]+)$ ]]; then
      capeff=${BASH_REMATCH[1]}
      break
    fi
  done <"$PROC_ROOT/self/status"
  if [[ -z $capeff ]]; then
    echo "unknown (no CapEff line in $PROC_ROOT/self/status)"
  elif (((16#$capeff >> CAP_IPC_LOCK_BIT) & 1)); then
    echo yes
  else
    echo no
  fi
}

check_memlock() {
  local limit cap want
  limit=$(ulimit -l)
  if [[ $MEMLOCK_MIN_KB == unlimited ]]; then
    want="unlimited"
  elif [[ $MEMLOCK_MIN_KB =~ ^[0-9]+$ ]]; then
    want="$MEMLOCK_MIN_KB KiB"
  else
    fail "memlock: MEMLOCK_MIN_KB='$MEMLOCK_MIN_KB' is not 'unlimited' or a number of KiB"
    return
  fi
  if [[ $limit == unlimited ]]; then
    pass "memlock: ulimit -l is unlimited"
    return
  fi
  if [[ $MEMLOCK_MIN_KB != unlimited && $limit =~ ^[0-9]+$ ]] && ((limit >= MEMLOCK_MIN_KB)); then
    pass "memlock: ulimit -l is $limit KiB >= $want"
    return
  fi
  cap=$(has_ipc_lock)
  case $cap in
    yes)
      pass "memlock: ulimit -l is $limit KiB, but CAP_IPC_LOCK is effective, so verbs memory registration ignores the limit"
      return
      ;;
    no) cap="CAP_IPC_LOCK is not effective" ;;
    *) cap="CAP_IPC_LOCK is $cap" ;;
  esac
  fail "memlock: ulimit -l is $limit KiB (needed: $want) and $cap; RDMA memory registration (ibv_reg_mr) will fail. $(memlock_fix)"
}

# What to change, for the stack's rdma.memlock strategy.
memlock_fix() {
  case $MEMLOCK_STRATEGY in
    root-ipc-lock) echo "rdma.memlock is root-ipc-lock, so the training container should run as UID 0 with IPC_LOCK: check that the pod was admitted under the stack's SCC (annotation openshift.io/scc) and that securityContext.runAsUser is 0" ;;
    machineconfig) echo "rdma.memlock is machineconfig: check that MachineConfig ${MEMLOCK_MACHINE_CONFIG:-99-<pool>-gpu-cluster-memlock} exists (oc get machineconfig; with rdma.machineConfig reference another stack or the platform team must create it), that the GPU MachineConfigPool finished updating (oc get mcp) and that this node has /etc/crio/crio.conf.d/99-gpu-cluster-memlock, then restart the pod" ;;
    preconfigured) echo "rdma.memlock is preconfigured, but this node's container runtime does not lift the limit: set rdma.memlock to root-ipc-lock (training container as root with IPC_LOCK) or machineconfig (CRI-O default_ulimits memlock=-1:-1, reboots the pool's nodes)" ;;
    *) echo "give the container an effective CAP_IPC_LOCK (UID 0 with IPC_LOCK) or an unlimited memlock limit" ;;
  esac
}

# --- RDMA -------------------------------------------------------------------------------------
# HCAs found by check_iface, for the uverbs check: "<hca> <iface>" lines.
declare -a found_hcas=()

check_iface() {
  local iface=$1 given=$2 net="$SYSFS_ROOT/class/net/$1" state mtu addrs hits found hca port
  local pstate phys where=() pairs=()
  if [[ ! $iface =~ ^[A-Za-z0-9_.-]+$ ]]; then
    fail "RDMA_INTERFACES: invalid interface name '$iface' in '$RDMA_INTERFACES'"
    return
  fi
  if [[ ! -e $net ]]; then
    fail "$iface: interface not found ($net); is the Multus network attached (pod annotation k8s.v1.cni.cncf.io/networks, NetworkAttachmentDefinition in this namespace)?"
    return
  fi

  # Link: a down link is worth reporting even if the RDMA side below is also broken.
  state=$(read_attr "$net/operstate" || echo "unreadable")
  if [[ $state == up ]]; then
    pass "$iface: link up"
  else
    fail "$iface: link down (operstate=$state); check the NIC, its cable/switch port and the SR-IOV VF or macvlan parent"
  fi

  # MTU: an SR-IOV VF's comes from the SriovNetworkNodePolicy (sriov-cni ignores a NAD's mtu), a
  # macvlan's from its NAD or its parent; a mismatch with the peers' MTU drops jumbo frames. The
  # program knows it only when rdma.mtu states it.
  mtu=$(read_attr "$net/mtu" || echo "unreadable")
  if [[ -z $RDMA_MTU ]]; then
    note "$iface: MTU $mtu (not checked: set rdma.mtu to the MTU the NICs must have, to check it)"
  elif [[ $mtu == "$RDMA_MTU" ]]; then
    pass "$iface: MTU $mtu"
  else
    fail "$iface: MTU $mtu, expected $RDMA_MTU (rdma.mtu); for SR-IOV set mtu in the SriovNetworkNodePolicy of this NIC (the NAD's mtu has no effect), for macvlan in the NAD or on its parent interface"
  fi

  # RDMA device and port: the ones holding a RoCE v2 GID equal to the interface's IPv4 address.
  addrs=$(iface_ipv4s "$iface")
  if [[ -z $addrs ]]; then
    # A missing `ip` is reported once, by check_rdma.
    [[ -n $ip_problem ]] && return
    fail "$iface: no IPv4 address ($(ipv4_source_text "$iface")); the NAD's IPAM assigns it"
    return
  fi
  if [[ -n $given ]]; then
    where=("$given")
  else
    read -r -a where <<<"$(candidate_hcas "$iface")"
  fi
  hits=""
  ((${#where[@]} == 0)) || hits=$(ipv4_gid_hits "$addrs" "${where[@]}")
  found=$(hit_ports "$hits")
  read -r -a pairs <<<"$found"
  if ((${#pairs[@]} == 0)); then
    fail "$iface: no RoCE v2 GID for its address ($addrs) on ${where[*]:-any RDMA device}; is the NIC RDMA-capable (SR-IOV isRdma / RDMA device plugin)${given:+ and is the device RDMA_HCAS pins, $given, right (rdma.nics[].hca; remove the pin to detect it)}?"
    return
  elif ((${#pairs[@]} > 1)); then
    fail "$iface: RoCE v2 GIDs for $addrs on several devices/ports (${pairs[*]}); pin its device in rdma.nics[].hca"
    return
  fi
  hca=${pairs[0]%:*}
  port=${pairs[0]##*:}
  found_hcas+=("$hca $iface")
  pstate=$(read_attr "$SYSFS_ROOT/class/infiniband/$hca/ports/$port/state" || echo "unreadable")
  if [[ ${pstate#*: } == ACTIVE ]]; then
    pass "$iface: RDMA device $hca port $port ACTIVE"
  else
    phys=$(read_attr "$SYSFS_ROOT/class/infiniband/$hca/ports/$port/phys_state" || true)
    fail "$iface: RDMA device $hca port $port is not ACTIVE (state $pstate${phys:+, phys_state $phys}); the RoCE link is not usable: check the link, the switch port and the NIC firmware (ibstat $hca)"
  fi
}

# Verbs device nodes: NCCL opens /dev/infiniband/uverbs<N>; the device plugin must inject them.
check_uverbs() {
  local dev have=() entry hca iface verbs node missing=()
  for dev in "$DEV_ROOT"/infiniband/uverbs*; do
    [[ -e $dev ]] && have+=("${dev##*/}")
  done
  if ((${#have[@]} == 0)); then
    fail "RDMA: no $DEV_ROOT/infiniband/uverbs* device; the pod did not get its RDMA devices: request the device-plugin resource (openshift.io/<resource> for SR-IOV, rdma/<resource> for the shared device plugin)"
    return
  fi
  # Where sysfs names the verbs device of an HCA (<hca>/device/infiniband_verbs/uverbs<N>), that
  # exact node must be there.
  for entry in "${found_hcas[@]}"; do
    read -r hca iface <<<"$entry"
    for verbs in "$SYSFS_ROOT/class/infiniband/$hca/device/infiniband_verbs"/uverbs*; do
      [[ -e $verbs ]] || continue
      node="$DEV_ROOT/infiniband/${verbs##*/}"
      [[ -e $node ]] || missing+=("$node ($hca, $iface)")
    done
  done
  if ((${#missing[@]} > 0)); then
    local IFS=,
    fail "RDMA: verbs device missing: ${missing[*]}; the pod did not get every RDMA device: check the device-plugin resource requests"
  else
    pass "RDMA: verbs devices present (${have[*]})"
  fi
}

check_rdma() {
  local ifaces=() given=() i
  split_list "$RDMA_INTERFACES" ifaces
  ip_problem=$(ip_bin_problem)
  [[ -z $ip_problem ]] || fail "RDMA: $ip_problem"
  if [[ -n $RDMA_HCAS ]]; then
    split_list "$RDMA_HCAS" given
    if ((${#given[@]} != ${#ifaces[@]})); then
      fail "RDMA_HCAS has ${#given[@]} entries ($RDMA_HCAS) but RDMA_INTERFACES has ${#ifaces[@]} ($RDMA_INTERFACES); they pair by position"
      given=()
    fi
  fi
  for i in "${!ifaces[@]}"; do
    if [[ -z ${ifaces[i]} ]]; then
      fail "RDMA_INTERFACES: empty entry in '$RDMA_INTERFACES'"
      continue
    fi
    check_iface "${ifaces[i]}" "${given[i]:-}"
  done
  check_uverbs
}

# --- NCCL env file ----------------------------------------------------------------------------
check_nccl_env() {
  local needed=0 hcas=() h
  [[ $RDMA_GID_INDEX == auto ]] && needed=1
  if [[ -n $RDMA_HCAS ]]; then
    split_list "$RDMA_HCAS" hcas
    for h in "${hcas[@]}"; do
      [[ -z $h ]] && needed=1
    done
  fi
  ((needed)) || return 0
  if [[ ! -e $NCCL_ENV_FILE ]]; then
    fail "NCCL env file $NCCL_ENV_FILE missing; the detect-rdma init container writes it: check its logs (kubectl logs <pod> -c detect-rdma) and that the nccl-env volume is mounted here"
  elif [[ ! -s $NCCL_ENV_FILE ]]; then
    fail "NCCL env file $NCCL_ENV_FILE is empty; rerun detect-rdma (restart the pod) and check its logs"
  else
    pass "NCCL env file $NCCL_ENV_FILE present"
  fi
}

# --- DeepSpeed ----------------------------------------------------------------------------------
# True when dotted version $1 >= $2 (major.minor.patch; what follows the numbers is ignored).
version_at_least() {
  local IFS=. i have=() want=()
  read -r -a have <<<"${1%%[!0-9.]*}"
  read -r -a want <<<"$2"
  for i in 0 1 2; do
    ((10#${have[i]:-0} > 10#${want[i]:-0})) && return 0
    ((10#${have[i]:-0} < 10#${want[i]:-0})) && return 1
  done
  return 0
}

# launch-deepspeed.sh starts DeepSpeed with --no_ssh (pods cannot ssh to each other).
check_deepspeed() {
  local out rc=0 version
  out=$("$PYTHON_BIN" -c 'import importlib.metadata as m; print(m.version("deepspeed"))' 2>&1) || rc=$?
  version=${out##*$'\n'}
  if ((rc != 0)); then
    fail "DeepSpeed: not installed in this image ($PYTHON_BIN: ${version}); launcher.kind deepspeed needs DeepSpeed >= $DEEPSPEED_MIN_VERSION: use an image that has it (pip install 'deepspeed>=$DEEPSPEED_MIN_VERSION' in an image built from it), or set launcher.kind to torchrun"
  elif [[ ! $version =~ ^[0-9]+(\.[0-9]+)*([.+-].*)?$ ]]; then
    fail "DeepSpeed: cannot read its version ('$version')"
  elif ! version_at_least "$version" "$DEEPSPEED_MIN_VERSION"; then
    fail "DeepSpeed: $version is older than $DEEPSPEED_MIN_VERSION, the first with --no_ssh (which the launcher needs: pods cannot ssh to each other); upgrade it in the image"
  else
    pass "DeepSpeed: $version (>= $DEEPSPEED_MIN_VERSION, has --no_ssh)"
  fi
}

# --- run ----------------------------------------------------------------------------------------
check_gpus
check_shm
[[ $PREFLIGHT_LAUNCHER != deepspeed ]] || check_deepspeed
if [[ -n $RDMA_INTERFACES ]]; then
  check_memlock
  check_rdma
  check_gdr
  check_nccl_env
fi

if ((failures > 0)); then
  echo "$PROG: $failures of $checks checks failed" >&2
  exit 1
fi
echo "$PROG: OK ($checks checks)"
