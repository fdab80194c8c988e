"""Network modes as plug-ins: what each adds to the training pod and to the cluster.

`pod_networking(settings)` is everything a mode contributes to the (one, shared) training pod:
annotations, NCCL env, extended resources, capabilities, init containers / native sidecars,
volumes and mounts. `cluster_objects(settings)` lists the custom resources the mode needs in
the cluster (Multus NetworkAttachmentDefinitions, GKE Network objects). Pure: no Pulumi here.
"""

from __future__ import annotations

import json
from typing import Any

from gpu_cluster.config.gke import gpudirect_release
from gpu_cluster.config.schema import NicSettings, RdmaSettings, Settings
from gpu_cluster.facts.gpudirect import (
    GIB_HOST_DIR,
    GIB_POD_DIR,
    HOST_LIB_DIR,
    NVIDIA_HOST_DIR,
    NVIDIA_POD_DIR,
    POD_LIB_DIR,
    RDMA_NIC_COUNT,
    RXDM_HEALTH_FILE,
    TCPX_SOCKET_DIR,
    GpuDirectRelease,
)
from gpu_cluster.plan.nccl import NCCL_ENV_FILE, nccl_env
from gpu_cluster.plan.podspec import (
    ConfigMapVolume,
    Container,
    EmptyDir,
    ExecProbe,
    HostPath,
    Mount,
    PodNetworking,
)
from gpu_cluster.plan.security import memlock_machine_config_name

# Pod annotation Multus reads to attach extra networks (k8s.cni.cncf.io network-attachment spec).
MULTUS_NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
# NAD annotation that ties a network to its device-plugin resource (Multus reads it).
DEVICE_RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"
# GKE multi-networking pod annotations (GKE docs; CEA gpudirect-tcpxo/nccl-test-latest.yaml).
GKE_DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
GKE_INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
# NRI device injector annotation prefix: devices for one named container.
GKE_DEVICES_ANNOTATION = "devices.gke.io/container."

SCRIPTS_VOLUME = "gpu-cluster-scripts"
SCRIPTS_DIR = "/opt/gpu-cluster"
NCCL_ENV_VOLUME = "nccl-env"


def pod_networking(s: Settings, scripts_config_map: str) -> PodNetworking:
    if s.network_mode == "rdma" and s.platform == "gke":
        return _gib_pod(s)
    if s.network_mode == "rdma":
        assert s.rdma is not None
        return _rdma_pod(s, s.rdma, scripts_config_map)
    if s.network_mode == "tcp":
        return PodNetworking(env=nccl_env(s))
    return _gpudirect_pod(s, gpudirect_release(s))


# --- rdma (OpenShift, Multus) ---------------------------------------------------------------


# UID of the pod's other containers when the SCC assigns none (memlock root-ipc-lock sets
# runAsUser RunAsAny): "nobody", owner of nothing in the image.
UNPRIVILEGED_UID = 65534


def _rdma_pod(s: Settings, rdma: RdmaSettings, scripts_config_map: str) -> PodNetworking:
    networks = [
        {"name": nic.network, "namespace": s.namespace, "interface": nic.interface}
        for nic in rdma.nics
    ]
    # The RDMA layout also reaches the training container, for preflight.sh.
    rdma_layout = (
        ("RDMA_INTERFACES", ",".join(nic.interface for nic in rdma.nics)),
        # Paired by position; an empty entry means "detect this one".
        ("RDMA_HCAS", ",".join(nic.hca or "" for nic in rdma.nics)),
        ("RDMA_GID_INDEX", str(rdma.gid)),
    )
    as_root = rdma.memlock == "root-ipc-lock"
    env = {
        **nccl_env(s),
        **dict(rdma_layout),
        # preflight.sh names the memlock fix for this strategy, and checks a stated MTU.
        "MEMLOCK_STRATEGY": rdma.memlock,
        # preflight.sh fails a node without a GPUDirect RDMA path when the fabric check is to
        # require GDRDMA, and warns otherwise (scripts/gdr-path.sh).
        "GDR_REQUIRED": str(s.verify.enabled and s.verify.require_gdr).lower(),
    }
    if rdma.mtu is not None:
        env["RDMA_MTU"] = str(rdma.mtu)
    if rdma.memlock == "machineconfig":
        env["MEMLOCK_MACHINE_CONFIG"] = memlock_machine_config_name(rdma.machine_config_pool)
    init: tuple[Container, ...] = ()
    volumes: tuple[EmptyDir | ConfigMapVolume, ...] = ()
    mounts: tuple[Mount, ...] = ()
    if rdma.gid == "auto" or not all(nic.hca for nic in rdma.nics):
        # Per-pod facts (HCA behind each netN, its RoCE v2 IPv4 GID index) are only known
        # inside the pod, so an init step works them out and the launchers source the result.
        env_mount = Mount(NCCL_ENV_VOLUME, NCCL_ENV_FILE.rsplit("/", 1)[0])
        init = (
            Container(
                name="detect-rdma",
                image=s.image,
                command=(f"{SCRIPTS_DIR}/detect-rdma.sh",),
                env=(*rdma_layout, ("NCCL_ENV_FILE", NCCL_ENV_FILE)),
                mounts=(Mount(SCRIPTS_VOLUME, SCRIPTS_DIR, read_only=True), env_mount),
                run_as_user=UNPRIVILEGED_UID if as_root else None,
            ),
        )
        volumes = (EmptyDir(NCCL_ENV_VOLUME),)
        mounts = (Mount(NCCL_ENV_VOLUME, env_mount.path, read_only=True),)
    return PodNetworking(
        annotations={MULTUS_NETWORKS_ANNOTATION: json.dumps(networks, separators=(",", ":"))},
        env=env,
        resources=rdma_resources(rdma),
        # Verbs memory registration pins pages; past RLIMIT_MEMLOCK the kernel allows it only
        # with an effective CAP_IPC_LOCK (torvalds/linux drivers/infiniband/core/umem.c), which
        # a non-root UID never has. With memlock machineconfig/preconfigured the limit itself
        # is unlimited and the container stays non-root with no capability.
        capabilities=("IPC_LOCK",) if as_root else (),
        training_runs_as_root=as_root,
        init_containers=init,
        volumes=volumes,
        mounts=mounts,
    )


def rdma_resources(rdma: RdmaSettings) -> dict[str, int]:
    """Device-plugin resources: one VF per SR-IOV/host-device NIC; one shared-HCA unit per
    macvlan resource (the RDMA shared device plugin exposes every matched HCA with it)."""
    out: dict[str, int] = {}
    for nic in rdma.nics:
        if nic.flavour == "macvlan":
            out[nic.resource] = 1
        else:
            out[nic.resource] = out.get(nic.resource, 0) + 1
    return out


def network_attachment(nic: NicSettings, rdma: RdmaSettings, namespace: str) -> dict[str, Any]:
    """A Multus NetworkAttachmentDefinition (k8s.cni.cncf.io/v1) for one RDMA NIC.

    Shaped like the operators' templates (tests/vendor/ holds them with their sources):
    sriov as the SR-IOV network operator renders a SriovNetwork, host-device and macvlan as
    NVIDIA's network operator renders HostDeviceNetwork and MacvlanNetwork.
    """
    assert nic.subnet is not None  # required of a stack that renders its NADs (config/rules.py)
    ipam: dict[str, Any] = {"type": "whereabouts", "range": nic.subnet}
    if nic.routes:
        ipam["routes"] = [{"dst": r} for r in nic.routes]
    cni: dict[str, Any] = {"cniVersion": "1.0.0", "name": nic.network, "type": nic.flavour}
    if nic.flavour == "sriov":
        # No mtu: sriov-cni never sets it (the SriovNetworkNodePolicy's mtu does), so a NAD
        # value would only mislead (k8snetworkplumbingwg/sriov-cni pkg/sriov/sriov.go SetupVF).
        # spoofchk and trust only when the stack sets them, as the SR-IOV operator renders a
        # SriovNetwork (bindata/manifests/cni-config/sriov/sriov-cni-config.yaml at 249e200).
        flags = {"spoofchk": nic.spoof_chk, "trust": nic.trust}
        cni.update({key: value for key, value in flags.items() if value is not None})
        cni["link_state"] = "enable"
    elif nic.flavour == "macvlan":
        cni.update({"master": nic.master, "mode": "bridge"})
        if rdma.mtu is not None:
            # Without one the macvlan gets its parent's MTU, and one above the parent's fails
            # the pod's network setup (containernetworking/plugins 3d27709
            # plugins/main/macvlan/macvlan.go loadConf; torvalds/linux drivers/net/macvlan.c
            # macvlan_common_newlink).
            cni["mtu"] = rdma.mtu
    # host-device: no `device`; Multus passes the allocated one as deviceID
    # (k8snetworkplumbingwg/multus-cni pkg/types/conf.go delegateAddDeviceID).
    cni["ipam"] = ipam
    metadata: dict[str, Any] = {"name": nic.network, "namespace": namespace}
    if nic.flavour != "macvlan":
        # Ties the NAD to its device-plugin resource so Multus can hand the CNI the device
        # the kubelet allocated; the RDMA shared device plugin (macvlan) allocates none.
        metadata["annotations"] = {DEVICE_RESOURCE_ANNOTATION: nic.resource}
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": metadata,
        "spec": {"config": json.dumps(cni, indent=2)},
    }


# --- GPUDirect TCPX / TCPXO (GKE) ------------------------------------------------------------


def gpu_network_name(index: int) -> str:
    """Name of the GKE Network / GKENetworkParamSet for GPU NIC `index` (1-based)."""
    return f"vpc{index}"


def _gpudirect_pod(s: Settings, release: GpuDirectRelease) -> PodNetworking:
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
    if release.mode == "tcpxo":
        volumes.append(HostPath("aperture-devices", "/dev/aperture_devices"))
        mounts.append(Mount("aperture-devices", "/dev/aperture_devices"))
    else:
        socket = Mount("tcpx-socket", TCPX_SOCKET_DIR)
        volumes.append(EmptyDir("tcpx-socket"))
        daemon_mounts.append(socket)
        mounts.append(socket)
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


def gke_network_objects(
    name: str, vpc: str, subnet: str, device_mode: str = "NetDevice"
) -> list[dict[str, Any]]:
    """GKENetworkParamSet + Network (networking.gke.io/v1) for one GPU NIC's VPC and subnet;
    device_mode RDMA for an RDMA NIC, NetDevice for a gVNIC or a TCPX(O) NIC."""
    return [
        {
            "apiVersion": "networking.gke.io/v1",
            "kind": "GKENetworkParamSet",
            "metadata": {"name": name},
            "spec": {"vpc": vpc, "vpcSubnet": subnet, "deviceMode": device_mode},
        },
        {
            "apiVersion": "networking.gke.io/v1",
            "kind": "Network",
            "metadata": {"name": name},
            "spec": {
                "parametersRef": {
                    "group": "networking.gke.io",
                    "kind": "GKENetworkParamSet",
                    "name": name,
                },
                "type": "Device",
            },
        },
    ]


# --- GPUDirect RDMA with gIB (GKE, A3 Ultra / A4) ---------------------------------------------

# Network objects of an RDMA machine's NICs: the second gVNIC, then one per RDMA NIC, named as
# GoogleCloudPlatform/cluster-toolkit modules/scheduler/gke-cluster `k8s_network_names`
# defaults (1047080) and as CEA gpudirect-rdma/nccl-test.yaml's pods name them (992db81).
GVNIC_NETWORK = "gvnic-1"


def rdma_network_name(index: int) -> str:
    """Network / GKENetworkParamSet name of RDMA NIC `index` (0-based)."""
    return f"rdma-{index}"


def gib_interfaces() -> list[dict[str, str]]:
    """The pod's interfaces in the node's NIC order: eth0 the cluster network, eth1 the second
    gVNIC, eth2..eth9 the RDMA NICs (CEA gpudirect-rdma/nccl-test.yaml; the gvnic-1 entry as
    cluster-toolkit examples/gke-consumption-options/dws-flex-start-queued-provisioning/
    nccl-jobset-example.yaml and AI-Hypercomputer/gpu-recipes a4 jobset attach it)."""
    return [
        {"interfaceName": "eth0", "network": "default"},
        {"interfaceName": "eth1", "network": GVNIC_NETWORK},
        *(
            {"interfaceName": f"eth{i + 2}", "network": rdma_network_name(i)}
            for i in range(RDMA_NIC_COUNT)
        ),
    ]


def _gib_pod(s: Settings) -> PodNetworking:
    """No sidecar and no added capability: the gIB plugin and the driver's libraries come from
    the node through read-only host paths (CEA gpudirect-rdma/nccl-test.yaml runs the test pod
    unprivileged, without host network). Non-root, where that pod is root without IPC_LOCK:
    the kernel creates /dev/infiniband/uverbsN mode 0666 (torvalds/linux 3beed9b
    drivers/infiniband/core/uverbs_main.c uverbs_devnode), and verbs registration is held to
    RLIMIT_MEMLOCK alike for root and any UID without CAP_IPC_LOCK (drivers/infiniband/core/
    umem.c), so Google's pod registers no more than this one may."""
    env = nccl_env(s)
    env["LD_LIBRARY_PATH"] = f"{NVIDIA_POD_DIR}/lib64"
    return PodNetworking(
        annotations={
            GKE_DEFAULT_INTERFACE_ANNOTATION: "eth0",
            GKE_INTERFACES_ANNOTATION: json.dumps(gib_interfaces(), separators=(",", ":")),
        },
        env=env,
        volumes=(HostPath("nvidia-install", NVIDIA_HOST_DIR), HostPath("gib", GIB_HOST_DIR)),
        mounts=(
            Mount("nvidia-install", NVIDIA_POD_DIR, read_only=True),
            Mount("gib", GIB_POD_DIR, read_only=True),
        ),
    )
