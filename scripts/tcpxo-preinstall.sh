#!/bin/sh
# Host-side preparation for GPUDirect-TCPXO on an A3 Mega node, run by the NCCL installer
# DaemonSet through `nsenter -at 1` (the host's namespaces). It opens TCP for the plugin's data
# path, loads the import-helper module and bind-mounts the aperture PCI devices (1ae0:0084)
# under /dev/aperture_devices for the LLCM path.
# Source: GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo/nccl-tcpxo-installer.yaml.
set -eu

/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT
modprobe import-helper
mkdir -p /dev/aperture_devices
lspci -nn -D | grep '1ae0:0084' | while IFS= read -r line; do
  bdf=$(echo "$line" | awk '{print $1}')
  target="/dev/aperture_devices/$bdf"
  mkdir -p "$target"
  # A re-run (DaemonSet restart) must not stack mounts.
  umount -R "$target" 2>/dev/null || true
  mount --bind "$(readlink -f "/sys/bus/pci/devices/$bdf")" "$target"
done
chmod -R a+r /dev/aperture_devices/
for resource in /dev/aperture_devices/*/resource*; do
  [ -e "$resource" ] && chmod a+rw "$resource"
done
exit 0
