#!/usr/bin/env bash
# Usage: detect-rdma.sh
#
# Works out NCCL's RDMA device list and RoCE v2 GID index for this pod and writes them to an env
# file that the launchers source. Run once at pod start (init container). Reads sysfs and the
# interfaces' IPv4 addresses: an interface's GID is the RoCE v2 one equal to its own address.
#
# Environment:
#   RDMA_INTERFACES  required  comma list of RDMA netdevs, e.g. net1,net2,net3,net4
#   RDMA_HCAS        optional  comma list of RDMA devices aligned with RDMA_INTERFACES,
#                              e.g. mlx5_6,mlx5_7,mlx5_8,mlx5_9; empty (or an empty entry) =
#                              detect from sysfs
#   RDMA_GID_INDEX   optional  auto (default) = detect | <integer> = use as given |
#                              nccl = let NCCL >= 2.21 pick the GID itself
#   SYSFS_ROOT       optional  default /sys (tests point it at a fake tree)
#   IP_BIN           optional  default ip (iproute2); reads each interface's IPv4 addresses.
#                              Without it they are read from PROC_ROOT/net/fib_trie and route
#   PROC_ROOT        optional  default /proc (tests point it at a fake tree)
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
problem=$(ip_bin_problem)
[[ -z $problem ]] || die "$problem"
case $RDMA_GID_INDEX in
  auto | nccl) ;;
  *) [[ $RDMA_GID_INDEX =~ ^[0-9]+$ ]] ||
    die "RDMA_GID_INDEX='$RDMA_GID_INDEX' is not 'auto', 'nccl' or a non-negative integer" ;;
esac

[[ $(ipv4_source) == ip ]] || echo "no $IP_BIN (iproute2) in the image: IPv4 addresses read from $PROC_ROOT/net/fib_trie and $PROC_ROOT/net/route"

# --- per interface: device, port, candidate GID indices ---------------------------------------
# The interface's RoCE v2 GIDs are the ones equal to its own IPv4 address(es) (see rdma-sysfs.sh).
declare -a hcas=() ports=() candidates=() shared_hca=()
for i in "${!ifaces[@]}"; do
  iface=${ifaces[i]}
  pin=${given_hcas[i]:-}
  [[ -e "$SYSFS_ROOT/class/net/$iface" ]] ||
    die "interface $iface not found ($SYSFS_ROOT/class/net/$iface); is the Multus network attached?"
  addrs=$(iface_ipv4s "$iface")
  [[ -n $addrs ]] ||
    die "interface $iface has no IPv4 address ($(ipv4_source_text "$iface")); the NAD's IPAM (whereabouts) assigns it: check the pod's network-status annotation"
  read -r -a where < <(candidate_hcas "$iface")
  # No PCI link to an RDMA device: a virtual netdev (macvlan) on an HCA other pods share too.
  [[ -d $SYSFS_ROOT/class/net/$iface/device/infiniband ]] || shared_hca+=("$iface")
  ((${#where[@]} > 0)) ||
    die "interface $iface has no RDMA device (no PCI-linked device in $SYSFS_ROOT/class/net/$iface/device/infiniband and none under $SYSFS_ROOT/class/infiniband); is the NIC RDMA-capable (SR-IOV isRdma / RDMA device plugin)?"
  hits=$(ipv4_gid_hits "$addrs" "${where[@]}")
  found=$(hit_ports "$hits")

  if [[ -n $pin ]]; then
    # A pin is checked, never trusted blindly: VF device names follow VF allocation.
    [[ -e "$SYSFS_ROOT/class/infiniband/$pin" ]] ||
      die "RDMA_HCAS pins $pin for $iface, but there is no $SYSFS_ROOT/class/infiniband/$pin; $iface ($addrs) has its RoCE v2 GID on: ${found:-no device}. Remove the pin (rdma.nics[].hca) to detect it"
    if [[ -n $found && " $found " != *" $pin:"* ]]; then
      die "RDMA_HCAS pins $pin for $iface, but $iface ($addrs) has its RoCE v2 GID on $found; remove the pin (rdma.nics[].hca) to detect it"
    fi
    if [[ " ${where[*]} " != *" $pin "* ]]; then
      die "RDMA_HCAS pins $pin for $iface, but $iface belongs to ${where[*]}; remove the pin (rdma.nics[].hca) to detect it"
    fi
    hits=$(grep "^$pin " < <(printf '%s\n' "$hits") || true)
    found=$(hit_ports "$hits")
    where=("$pin")
  fi

  read -r -a pairs < <(printf '%s\n' "$found")
  if ((${#pairs[@]} == 0)); then
    # No readable GID names the address. A fixed or NCCL-chosen index still needs the device:
    # a single device with a single port is an unambiguous answer.
    if [[ $RDMA_GID_INDEX != auto && ${#where[@]} == 1 ]]; then
      read -r -a all_ports < <(dir_entries "$SYSFS_ROOT/class/infiniband/${where[0]}/ports")
      if ((${#all_ports[@]} == 1)); then
        warn "no RoCE v2 GID of $iface ($addrs) found on ${where[0]}; using its only port ${all_ports[0]}"
        pairs=("${where[0]}:${all_ports[0]}")
      fi
    fi
    ((${#pairs[@]} == 1)) ||
      die "no RoCE v2 IPv4 GID for $iface ($addrs) on ${where[*]} (checked $SYSFS_ROOT/class/infiniband/<dev>/ports/*/gids); is RoCE v2 enabled on the NIC and the address assigned?"
  elif ((${#pairs[@]} > 1)); then
    die "interface $iface ($addrs) has RoCE v2 GIDs on several devices/ports (${pairs[*]}); pin its device in rdma.nics[].hca"
  fi
  hca=${pairs[0]%:*}
  port=${pairs[0]##*:}
  found=""
  while read -r _ _ idx; do
    [[ -n ${idx:-} ]] && found+="${found:+ }$idx"
  done < <(printf '%s\n' "$hits")
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
  read -r -a first < <(printf '%s\n' "${candidates[0]}")
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
    if ((${#shared_hca[@]} > 0)); then
      # NCCL's own pick does not look at the pod's address: on a shared HCA it can take the
      # host's or another pod's GID, so gidIndex nccl is no way out here.
      die "RoCE v2 IPv4 GID indices differ between NICs:${detail}; NCCL_IB_GID_INDEX is one index for all NICs, and ${shared_hca[*]} share their HCA with other pods (macvlan), where gidIndex nccl can pick the host's or another pod's GID: attach the NICs as SR-IOV VFs or host-device NICs (one GID table each), or use one macvlan NIC"
    fi
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
