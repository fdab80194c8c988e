"""The pod of GKE's `tcpx` and `tcpxo` (config/netmodes/gpudirect_tcp.py): the release's RxDM
as a native sidecar, the GPU NICs as networks, the plugin's libraries from the node."""

from __future__ import annotations

import json

from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.netmodes.gpudirect_tcp import GpuDirectTcpMode
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.gpudirect import (
    HOST_LIB_DIR,
    POD_LIB_DIR,
    RXDM_HEALTH_FILE,
    TCPX_SOCKET_DIR,
)
from gpu_cluster.plan.nccl import nccl_env
from gpu_cluster.plan.netmodes.gke_networks import (
    GKE_DEFAULT_INTERFACE_ANNOTATION,
    GKE_INTERFACES_ANNOTATION,
    gpu_network_name,
)
from gpu_cluster.plan.podspec import Container, EmptyDir, ExecProbe, HostPath, Mount, PodNetworking

# NRI device injector annotation prefix: devices for one named container.
GKE_DEVICES_ANNOTATION = "devices.gke.io/container."


def tcpxo_pod(s: Settings, scripts_config_map: str) -> PodNetworking:
    """TCPXO's LLCM devices, which its installer binds on the node."""
    aperture = "/dev/aperture_devices"
    return _gpudirect_pod(
        s, (HostPath("aperture-devices", aperture),), (), (Mount("aperture-devices", aperture),)
    )


def tcpx_pod(s: Settings, scripts_config_map: str) -> PodNetworking:
    """TCPX's RxDM sockets, in a directory it shares with the training container."""
    socket = Mount("tcpx-socket", TCPX_SOCKET_DIR)
    return _gpudirect_pod(s, (EmptyDir("tcpx-socket"),), (socket,), (socket,))


def _gpudirect_pod(
    s: Settings,
    extra_volumes: tuple[EmptyDir | HostPath, ...],
    extra_daemon_mounts: tuple[Mount, ...],
    extra_mounts: tuple[Mount, ...],
) -> PodNetworking:
    mode = mode_of(s)
    assert isinstance(mode, GpuDirectTcpMode)
    release = mode.release(s)
    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": f"eth{i}", "network": gpu_network_name(i)}
        for i in range(1, release.nic_count + 1)
    ]
    daemon = f"{release.mode}-daemon"
    devices = "".join(f"- path: {d}\n" for d in release.rxdm_devices)
    libs = Mount("nvidia-libs", POD_LIB_DIR, read_only=True)
    daemon_mounts = [libs, Mount("sys", "/hostsysfs"), Mount("proc-sys", "/hostprocsysfs")]
    volumes: list[EmptyDir | HostPath] = [
        HostPath("nvidia-libs", HOST_LIB_DIR),
        HostPath("sys", "/sys"),
        HostPath("proc-sys", "/proc/sys"),
    ]
    mounts = [libs]
    # The training container stays non-root with no capability in both modes, where Google's
    # test pods run as root (tests/vendor/gke_gpudirect.yaml lists it): what it reaches is
    # open to any UID. TCPXO: the installer makes the aperture devices a+rw
    # (scripts/tcpxo-preinstall.sh, as CEA gpudirect-tcpxo/nccl-tcpxo-installer.yaml) and RxDM
    # listens on abstract sockets, which have no file permissions (google/nccl-plugin-gpudirect-
    # tcpxo 04815d1 buffer_mgmt_daemon/common/uds_helpers.cc). TCPX: RxDM sets umask(0) before
    # creating its sockets in /run/tcpx and hands buffers over them as file descriptors
    # (google/tcpgpudmarxd a6e09b3 app/tcpgpudmarxd.cu, src/unix_socket_connection.cc). Google's
    # TCPX pod adds IPC_LOCK; a non-root UID never has an added capability (no ambient ones,
    # kubernetes/kubernetes#56374), so it would be inert here and is not added.
    volumes.extend(extra_volumes)
    daemon_mounts.extend(extra_daemon_mounts)
    mounts.extend(extra_mounts)
    daemon_env: tuple[tuple[str, str], ...] = (("LD_LIBRARY_PATH", POD_LIB_DIR),)
    probe = None
    if release.rxdm_health_check:
        # RxDM writes the file once its buffer manager is ready (~30 s); as a native sidecar the
        # probe holds the training container until then (CEA gpudirect-tcpxo/best-practice.md,
        # probe timings as published there).
        daemon_env += (("HEALTH_CHECK_LOG_FILE", RXDM_HEALTH_FILE),)
        probe = ExecProbe(
            command=("cat", RXDM_HEALTH_FILE),
            initial_delay_seconds=1,
            period_seconds=5,
            timeout_seconds=1,
            failure_threshold=6,
        )
    sidecar = Container(
        name=daemon,
        image=release.rxdm_image,
        command=release.rxdm_command,
        args=release.rxdm_args,
        env=daemon_env,
        mounts=tuple(daemon_mounts),
        # Google's securityContext: these capabilities on top of the runtime's defaults, which
        # its daemon is only published and tested with (CEA nccl-test-latest.yaml).
        capabilities=release.rxdm_capabilities,
        drop_all_capabilities=False,
        startup_probe=probe,
        restart_policy="Always",
        # Google's manifests set no limits on RxDM: throttling or an OOM kill stalls GPU traffic.
        cpu_limit=None,
        memory_limit=None,
        read_only_root=False,
        # NET_ADMIN must be effective to program flow steering, so RxDM runs as root as in
        # Google's manifests (the image's user); the pod's default and the training container
        # stay non-root.
        run_as_root=True,
    )
    env = nccl_env(s)
    if release.nccl_init_script is None:
        env["LD_LIBRARY_PATH"] = POD_LIB_DIR
    # Else not replaced, so the image's own entries stay: the release's profile, which the
    # launchers source, prepends the plugin's directory (facts/gpudirect.py _TCPXO_NCCL_ENV).
    annotations = {
        GKE_DEFAULT_INTERFACE_ANNOTATION: "eth0",
        GKE_INTERFACES_ANNOTATION: json.dumps(interfaces, separators=(",", ":")),
        GKE_DEVICES_ANNOTATION + daemon: devices,
    }
    return PodNetworking(
        annotations=annotations,
        env=env,
        init_containers=(sidecar,),
        volumes=tuple(volumes),
        mounts=tuple(mounts),
    )
