#!/usr/bin/env bash
# Usage: . rdma-sysfs.sh   (sourced by detect-rdma.sh and preflight.sh, after they set SYSFS_ROOT)
#
# How an RDMA netdev maps to its device and port in sysfs, one rule for every script.
set -euo pipefail
: "${SYSFS_ROOT:?set SYSFS_ROOT before sourcing rdma-sysfs.sh}"

# Print the first line of a sysfs attribute, or fail quietly. In containers, reading GID entries
# that are not mapped into the pod's network namespace fails with EINVAL; callers treat a failed
# read as "not this one" and move on instead of aborting.
read_attr() {
  local line=""
  { IFS= read -r line <"$1"; } 2>/dev/null || [[ -n $line ]] || return 1
  printf '%s\n' "$line"
}

# Split a comma list into the array named by $2, trimming blanks (empty items stay empty).
split_list() {
  local -n out=$2
  local i
  out=()
  # The extra comma keeps a trailing empty item, which `read -a` would otherwise drop.
  IFS=, read -r -a out <<<"$1,"
  for i in "${!out[@]}"; do
    out[i]=${out[i]//[[:space:]]/}
  done
}

# Ports of an RDMA device whose GID table names the interface (normally just port 1).
ports_listing_iface() {
  local hca=$1 iface=$2 port ndev
  for port in "$SYSFS_ROOT/class/infiniband/$hca/ports"/*/; do
    port=${port%/}
    for ndev in "$port"/gid_attrs/ndevs/*; do
      if [[ $(read_attr "$ndev" || true) == "$iface" ]]; then
        echo "${port##*/}"
        break
      fi
    done
  done
}

# RDMA devices of an interface, space-separated. SR-IOV VFs and host-device NICs link theirs via
# the PCI device (class/net/<if>/device/infiniband/<hca>); virtual netdevs such as macvlan on a
# shared HCA have no device link, and there it is the device whose GID table names the interface.
hcas_of_iface() {
  local iface=$1 dir="$SYSFS_ROOT/class/net/$1/device/infiniband" entries=() hca
  if [[ -d $dir ]]; then
    for hca in "$dir"/*; do
      [[ -e $hca ]] && entries+=("${hca##*/}")
    done
  else
    for hca in "$SYSFS_ROOT/class/infiniband"/*; do
      [[ -e $hca && -n $(ports_listing_iface "${hca##*/}" "$iface") ]] && entries+=("${hca##*/}")
    done
  fi
  echo "${entries[*]}"
}
