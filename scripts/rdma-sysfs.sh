#!/usr/bin/env bash
# Usage: . rdma-sysfs.sh   (sourced by detect-rdma.sh and preflight.sh, after they set SYSFS_ROOT)
#
# How an RDMA netdev maps to its device, port and GID, one rule for every script: by the
# interface's own IPv4 address. The kernel's per-GID netdev attribute (gid_attrs/ndevs) prints only
# a name and is not filtered by network namespace (torvalds/linux drivers/infiniband/core/sysfs.c),
# so on a shared HCA (macvlan) another pod's net1 looks like ours; its IPv4-mapped GID
# (::ffff:a.b.c.d) does not.
#
# Environment: SYSFS_ROOT (required), IP_BIN (optional, default ip: iproute2), PROC_ROOT
# (optional, default /proc: read for the addresses when the image has no iproute2).
set -euo pipefail
: "${SYSFS_ROOT:?set SYSFS_ROOT before sourcing rdma-sysfs.sh}"
IP_BIN=${IP_BIN:-ip}
PROC_ROOT=${PROC_ROOT:-/proc}

# Print the first line of a sysfs attribute, or fail quietly. In containers, reading GID entries
# that are not mapped into the pod's network namespace fails with EINVAL; callers treat a failed
# read as "not this one" and move on instead of aborting.
read_attr() {
  local line=""
  { IFS= read -r line <"$1"; } 2>/dev/null || [[ -n $line ]] || return 1
  printf '%s\n' "$line"
}

# No here-strings (<<<) or here-documents in this file and detect-rdma.sh: bash before 5.1 writes
# them to a temporary file, which detect-rdma's container (read-only root, no writable TMPDIR)
# cannot create. Lines come through process substitution (a pipe) instead.

# Split $2 at each one-character separator $1 into the array named by $3; empty items stay.
split_on() {
  local -n parts=$3
  local rest=$2$1
  parts=()
  while [[ -n $rest ]]; do
    parts+=("${rest%%"$1"*}")
    rest=${rest#*"$1"}
  done
}

# Split a comma list into the array named by $2, trimming blanks (empty items stay empty).
split_list() {
  local -n out=$2
  local i
  split_on , "$1" "$2"
  for i in "${!out[@]}"; do
    out[i]=${out[i]//[[:space:]]/}
  done
}

# Where the interfaces' IPv4 addresses come from: "ip" when $IP_BIN runs, else "proc" (the
# kernel's own tables, present in every network namespace: slim images, and possibly the
# training image, lack iproute2), else "" when neither can be read.
ipv4_source() {
  if command -v "$IP_BIN" >/dev/null 2>&1; then
    echo ip
  elif [[ -r $PROC_ROOT/net/fib_trie && -r $PROC_ROOT/net/route ]]; then
    echo proc
  fi
}

# Why the addresses cannot be read ("" if they can). Without them every interface would look
# address-less and the error would wrongly point at IPAM.
ip_bin_problem() {
  [[ -n $(ipv4_source) ]] ||
    echo "$IP_BIN not found and $PROC_ROOT/net/fib_trie or $PROC_ROOT/net/route not readable: the RDMA interfaces' IPv4 addresses are read with one of them; install iproute2 in the image or set IP_BIN to its path"
}

# How iface_ipv4s read an interface's addresses, for messages.
ipv4_source_text() {
  if [[ $(ipv4_source) == ip ]]; then
    echo "'$IP_BIN -4 -o addr show dev $1'"
  else
    echo "$PROC_ROOT/net/fib_trie and $PROC_ROOT/net/route, as iproute2's ip is not in the image"
  fi
}

# IPv4 addresses of an interface, space-separated ("" if none or they cannot be read).
iface_ipv4s() {
  local out line list=()
  if [[ $(ipv4_source) == proc ]]; then
    proc_iface_ipv4s "$1"
    return
  fi
  out=$("$IP_BIN" -4 -o addr show dev "$1" 2>/dev/null) || true
  while IFS= read -r line; do
    [[ $line =~ inet\ ([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)/ ]] && list+=("${BASH_REMATCH[1]}")
  done < <(printf '%s\n' "$out")
  echo "${list[*]}"
}

# iface_ipv4s without iproute2. The pod's own addresses are the leaves of /proc/net/fib_trie
# marked "/32 host LOCAL"; an address belongs to the interface whose directly connected route
# (no gateway) in /proc/net/route holds it: the route the kernel adds with the address
# (torvalds/linux net/ipv4/fib_trie.c fib_trie_seq_show, fib_route_seq_show; both formats "not
# supposed to be changed"). Both files are per network namespace. Unlike ip, this misses an
# address without such a route (a /32, or added with noprefixroute), which IPAM does not assign;
# the RDMA subnets never overlap (the stack refuses it), so no address matches two interfaces.
proc_iface_ipv4s() {
  local line leaf="" addr list=() iface dest flags mask
  local -a locals=()
  while IFS= read -r line; do
    if [[ $line =~ \|--\ ([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)[[:space:]]*$ ]]; then
      leaf=${BASH_REMATCH[1]}
    elif [[ -n $leaf && $line =~ ^[[:space:]]*/32\ host\ LOCAL ]]; then
      [[ " ${locals[*]} " == *" $leaf "* ]] || locals+=("$leaf")
    fi
  done <"$PROC_ROOT/net/fib_trie"
  while read -r iface dest _ flags _ _ _ mask _; do
    [[ $iface == "$1" && $dest =~ ^[0-9A-Fa-f]{8}$ && $mask =~ ^[0-9A-Fa-f]{8}$ && $flags =~ ^[0-9A-Fa-f]{4}$ ]] || continue
    # RTF_UP (0x1) set, RTF_GATEWAY (0x2) clear: a directly connected route (linux/route.h).
    (((16#$flags & 3) == 1)) || continue
    for addr in "${locals[@]}"; do
      if (((16#$(route_hex "$addr") & 16#$mask) == 16#$dest)) && [[ " ${list[*]} " != *" $addr "* ]]; then
        list+=("$addr")
      fi
    done
  done <"$PROC_ROOT/net/route"
  echo "${list[*]}"
}

# An address as /proc/net/route prints addresses: the network-order value printed as a host
# integer (%08X), i.e. byte-reversed on little-endian CPUs (x86_64, aarch64: the GPU nodes).
route_hex() {
  local -a octet
  split_on . "$1" octet
  printf '%02X%02X%02X%02X' "${octet[3]}" "${octet[2]}" "${octet[1]}" "${octet[0]}"
}

# The GID sysfs shows for an IPv4 address: ::ffff:a.b.c.d, fully expanded.
ipv4_mapped_gid() {
  local -a octet
  split_on . "$1" octet
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "${octet[@]:0:4}"
}

# RDMA devices that can back the interface, space-separated: the PCI-linked ones of an SR-IOV VF
# or host-device NIC (class/net/<if>/device/infiniband/<hca>); for virtual netdevs such as a
# macvlan on a shared HCA, which have no such link, every RDMA device.
candidate_hcas() {
  local dir="$SYSFS_ROOT/class/net/$1/device/infiniband" hca entries=()
  [[ -d $dir ]] || dir="$SYSFS_ROOT/class/infiniband"
  for hca in "$dir"/*; do
    [[ -e $hca ]] && entries+=("${hca##*/}")
  done
  echo "${entries[*]}"
}

# "<hca> <port> <index>" lines, in ascending index order per port, for every RoCE v2 GID on the
# given devices that equals the IPv4-mapped GID of one of the addresses.
# Usage: ipv4_gid_hits "<addr> ..." <hca>...
ipv4_gid_hits() {
  local addresses=$1 addr hca port path idx gid type want=" "
  local -a indices
  for addr in $addresses; do
    want+="$(ipv4_mapped_gid "$addr") "
  done
  shift
  for hca in "$@"; do
    for port in "$SYSFS_ROOT/class/infiniband/$hca/ports"/*; do
      [[ -d $port/gids ]] || continue
      indices=()
      for path in "$port"/gids/*; do
        idx=${path##*/}
        [[ $idx =~ ^[0-9]+$ ]] || continue
        gid=""
        { IFS= read -r gid <"$path"; } 2>/dev/null || [[ -n $gid ]] || continue
        [[ $want == *" $gid "* ]] || continue
        type=""
        { IFS= read -r type <"$port/gid_attrs/types/$idx"; } 2>/dev/null || [[ -n $type ]] || continue
        [[ $type == "RoCE v2" ]] || continue
        indices[10#$idx]=1 # a sparse array lists its keys in numeric order
      done
      for idx in "${!indices[@]}"; do
        echo "$hca ${port##*/} $idx"
      done
    done
  done
}

# "hca:port" list of the GID hits, e.g. "mlx5_2:1 mlx5_3:1" (each pair once).
hit_ports() {
  local hca port idx seen=" "
  while read -r hca port idx; do
    [[ -n $hca && $seen != *" $hca:$port "* ]] && seen+="$hca:$port "
  done < <(printf '%s\n' "$1")
  seen=${seen# }
  echo "${seen% }"
}
