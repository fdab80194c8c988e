#!/usr/bin/env bash
# Usage: detect-rdma.sh
#
# Works out NCCL's RDMA device list and RoCE v2 GID index for this pod and writes them to an env
# file that the launchers source. Run once at pod start (init container). Reads only sysfs.
#
# Environment:
#   RDMA_INTERFACES  required  comma list of RDMA netdevs, e.g. net1,net2,net3,net4
#   RDMA_HCAS        optional  comma list of RDMA devices aligned with RDMA_INTERFACES,
#                              e.g. mlx5_6,mlx5_7,mlx5_8,mlx5_9; empty (or an empty entry) =
#                              detect from sysfs
#   RDMA_GID_INDEX   optional  auto (default) = detect | <integer> = use as given |
#                              nccl = let NCCL >= 2.21 pick the GID itself
#   SYSFS_ROOT       optional  default /sys (tests point it at a fake tree)
#   NCCL_ENV_FILE    optional  default /var/run/gpu-cluster/nccl.env
#
# Output: NCCL_ENV_FILE with `export NCCL_IB_HCA==<hca>:<port>,...` plus either
# `export NCCL_IB_GID_INDEX=<n>` or (nccl mode) NCCL_IB_ROCE_VERSION_NUM=2 and
# NCCL_IB_ADDR_FAMILY=AF_INET; a summary on stdout. Exits non-zero, writing nothing, on error.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# Functions below run inside $(...); without this, errexit would be off there.
shopt -s inherit_errexit

readonly PROG=detect-rdma
SYSFS_ROOT=${SYSFS_ROOT:-/sys}
# shellcheck source=rdma-sysfs.sh
. "$(dirname "$0")/rdma-sysfs.sh"
NCCL_ENV_FILE=${NCCL_ENV_FILE:-/var/run/gpu-cluster/nccl.env}
RDMA_GID_INDEX=${RDMA_GID_INDEX:-auto}
RDMA_HCAS=${RDMA_HCAS:-}

die() {
  echo "$PROG: error: $*" >&2
  exit 1
}

warn() {
  echo "$PROG: warning: $*" >&2
}

# split_list, then check every item: empty items are an error unless $3 is "allow-empty".
split_devices() {
  local -n items=$2
  local item
  split_list "$1" "$2"
  for item in "${items[@]}"; do
    if [[ -z $item ]]; then
      [[ ${3:-} == allow-empty ]] || die "empty entry in comma list '$1'"
      continue
    fi
    # The values end up in a sourced shell file, so allow only plain device-name characters.
    [[ $item =~ ^[A-Za-z0-9_.-]+$ ]] || die "invalid device name '$item' in '$1'"
  done
}

# The interface's single RDMA device, or die saying why not.
hca_of_iface() {
  local iface=$1 dir="$SYSFS_ROOT/class/net/$1/device/infiniband" entries=()
  read -r -a entries <<<"$(hcas_of_iface "$iface")"
  case ${#entries[@]} in
    1) echo "${entries[0]}" ;;
    0) die "interface $iface has no RDMA device (nothing in $dir and no RDMA device's GID table names it); is the NIC RDMA-capable (SR-IOV isRdma / RDMA device plugin)?" ;;
    *) die "interface $iface maps to several RDMA devices (${entries[*]}); set RDMA_HCAS" ;;
  esac
}

# GID indices on <hca> port <port> that are RoCE v2, IPv4-mapped (::ffff:a.b.c.d) and bound to
# the interface, space-separated in ascending order.
roce_v2_ipv4_indices() {
  local hca=$1 port=$2 iface=$3 base gid path idx
  local -a hits=()
  base="$SYSFS_ROOT/class/infiniband/$hca/ports/$port"
  for path in "$base"/gids/*; do
    idx=${path##*/}
    [[ $idx =~ ^[0-9]+$ ]] || continue
    gid=$(read_attr "$path") || continue
    [[ $gid == 0000:0000:0000:0000:0000:ffff:* ]] || continue
    [[ $(read_attr "$base/gid_attrs/types/$idx" || true) == "RoCE v2" ]] || continue
    [[ $(read_attr "$base/gid_attrs/ndevs/$idx" || true) == "$iface" ]] || continue
    hits[10#$idx]=1 # a sparse array lists its keys in numeric order
  done
  echo "${!hits[*]}"
}

# Entries of a directory, space-separated ("" if none or unreadable).
dir_entries() {
  local entry names=()
  for entry in "$1"/*; do
    [[ -e $entry || -L $entry ]] && names+=("${entry##*/}")
  done
  echo "${names[*]}"
}

# --- inputs -----------------------------------------------------------------------------------
[[ -n ${RDMA_INTERFACES:-} ]] || die "RDMA_INTERFACES is empty; set it to the RDMA netdevs, e.g. net1,net2,net3,net4"
declare -a ifaces=() given_hcas=()
split_devices "$RDMA_INTERFACES" ifaces
if [[ -n $RDMA_HCAS ]]; then
  split_devices "$RDMA_HCAS" given_hcas allow-empty
  ((${#given_hcas[@]} == ${#ifaces[@]})) ||
    die "RDMA_HCAS has ${#given_hcas[@]} entries (${RDMA_HCAS}) but RDMA_INTERFACES has ${#ifaces[@]} (${RDMA_INTERFACES}); they pair by position"
fi
case $RDMA_GID_INDEX in
  auto | nccl) ;;
  *) [[ $RDMA_GID_INDEX =~ ^[0-9]+$ ]] ||
    die "RDMA_GID_INDEX='$RDMA_GID_INDEX' is not 'auto', 'nccl' or a non-negative integer" ;;
esac

# --- per interface: device, port, candidate GID indices ---------------------------------------
declare -a hcas=() ports=() candidates=()
for i in "${!ifaces[@]}"; do
  iface=${ifaces[i]}
  [[ -e "$SYSFS_ROOT/class/net/$iface" ]] ||
    die "interface $iface not found ($SYSFS_ROOT/class/net/$iface); is the Multus network attached?"

  if [[ -n ${given_hcas[i]:-} ]]; then
    hca=${given_hcas[i]}
    [[ -e "$SYSFS_ROOT/class/infiniband/$hca" ]] ||
      die "RDMA device $hca (given for $iface in RDMA_HCAS) not found under $SYSFS_ROOT/class/infiniband"
    link="$SYSFS_ROOT/class/net/$iface/device/infiniband"
    if [[ -d $link && ! -e "$link/$hca" ]]; then
      actual=$(dir_entries "$link")
      die "RDMA_HCAS gives $hca for $iface, but $iface belongs to ${actual:-no RDMA device}"
    fi
  else
    hca=$(hca_of_iface "$iface")
  fi

  # NCCL wants <hca>:<port>; take the port whose GID table names the interface.
  mapfile -t iface_ports < <(ports_listing_iface "$hca" "$iface")
  if ((${#iface_ports[@]} == 0)); then
    read -r -a all_ports <<<"$(dir_entries "$SYSFS_ROOT/class/infiniband/$hca/ports")"
    # Without a readable GID naming the interface a single-port device still has a clear answer.
    ((${#all_ports[@]} == 1)) || die "no port of $hca lists $iface in its GID table (ports: ${all_ports[*]:-none})"
    iface_ports=("${all_ports[0]}")
  fi
  port=${iface_ports[0]}

  found=$(roce_v2_ipv4_indices "$hca" "$port" "$iface")
  if [[ $RDMA_GID_INDEX == auto && -z $found ]]; then
    die "no RoCE v2 IPv4 GID for $iface on $hca port $port (checked $SYSFS_ROOT/class/infiniband/$hca/ports/$port/gids); does $iface have an IPv4 address?"
  fi
  if [[ $RDMA_GID_INDEX =~ ^[0-9]+$ && " $found " != *" $RDMA_GID_INDEX "* ]]; then
    warn "GID index $RDMA_GID_INDEX is not a RoCE v2 IPv4 GID of $iface on $hca:$port (found: ${found:-none}); using it as given"
  fi
  hcas+=("$hca")
  ports+=("$port")
  candidates+=("$found")
done

# --- one GID index for all NICs (NCCL_IB_GID_INDEX is global) ----------------------------------
gid_index=$RDMA_GID_INDEX
if [[ $RDMA_GID_INDEX == auto ]]; then
  # An interface may have several IPv4 addresses; take the lowest index every NIC shares.
  gid_index=""
  read -r -a first <<<"${candidates[0]}"
  for idx in "${first[@]}"; do
    shared=1
    for c in "${candidates[@]}"; do
      [[ " $c " == *" $idx "* ]] || shared=0
    done
    if ((shared)); then
      gid_index=$idx
      break
    fi
  done
  if [[ -z $gid_index ]]; then
    detail=""
    for i in "${!ifaces[@]}"; do
      detail+=" ${ifaces[i]}(${hcas[i]}:${ports[i]})=${candidates[i]// /|}"
    done
    die "RoCE v2 IPv4 GID indices differ between NICs:${detail}; NCCL_IB_GID_INDEX is global, so set gidIndex: nccl (RDMA_GID_INDEX=nccl, NCCL >= 2.21 picks the GID per NIC)"
  fi
fi

# --- output ------------------------------------------------------------------------------------
hca_list=""
for i in "${!ifaces[@]}"; do
  hca_list+="${hca_list:+,}${hcas[i]}:${ports[i]}"
  if [[ $gid_index == nccl ]]; then
    echo "${ifaces[i]} -> ${hcas[i]}:${ports[i]} gid index chosen by NCCL (RoCE v2 IPv4 at: ${candidates[i]:-none seen})"
  else
    echo "${ifaces[i]} -> ${hcas[i]}:${ports[i]} gid index $gid_index"
  fi
done

# `=` makes NCCL match names exactly (otherwise mlx5_1 would also select mlx5_10..mlx5_19).
content="export NCCL_IB_HCA==$hca_list"$'\n'
if [[ $gid_index == nccl ]]; then
  content+="export NCCL_IB_ROCE_VERSION_NUM=2"$'\n'"export NCCL_IB_ADDR_FAMILY=AF_INET"$'\n'
else
  content+="export NCCL_IB_GID_INDEX=$gid_index"$'\n'
fi

mkdir -p "$(dirname "$NCCL_ENV_FILE")" || die "cannot create directory for $NCCL_ENV_FILE"
# Write then rename so a reader never sees a half-written file.
tmp="$NCCL_ENV_FILE.tmp.$$"
printf '%s' "$content" >"$tmp" || die "cannot write $tmp"
mv -f "$tmp" "$NCCL_ENV_FILE" || die "cannot move $tmp to $NCCL_ENV_FILE"
echo "wrote $NCCL_ENV_FILE"
