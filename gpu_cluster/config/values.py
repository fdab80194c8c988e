"""The value types of stack config: Kubernetes quantities (their validators in quantities.py)
and names, images, CIDRs."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from gpu_cluster.config.netmodes import mode_names
from gpu_cluster.config.quantities import (
    check_cpu,
    check_quantity,
    check_size,
    check_sweep_size,
    integer_text,
    quantity_text,
)
from gpu_cluster.facts.gcp import RBAC_SECURITY_GROUP_NAME, USABLE_PRIVATE_RANGES
from gpu_cluster.facts.gcs import BUCKET_NAME, BUCKET_NAME_FORBIDDEN
from gpu_cluster.facts.kubernetes import (
    DNS_1035_LABEL,
    DNS_1123_LABEL,
    DNS_LABEL_MAX,
    DNS_SUBDOMAIN,
    DNS_SUBDOMAIN_MAX,
    ENV_VAR_NAME,
    GIT_SYNC_MIN_PERIOD_NS,
    GPU_RESOURCE,
    IMAGE_DEFAULT_TAG,
    LABEL_VALUE_MAX,
    PATH_PART_MAX_BYTES,
    config_map_key_problem,
    container_resource_problem,
    interface_name_problem,
    is_native_resource,
    parse_go_duration,
    parse_image,
    qualified_name_problem,
)
from gpu_cluster.facts.kueue import (
    JOBSET_MIN_VERSION,
    KUEUE_MIN_VERSION,
    TOPOLOGY_NODE_LABEL_MAX,
    release_text,
)
from gpu_cluster.facts.machines import MACHINES


def _dns_label(value: str) -> str:
    if len(value) > DNS_LABEL_MAX or not DNS_1035_LABEL.fullmatch(value):
        raise ValueError(
            "must be a DNS-1035 label (Kubernetes' rule for Service names): lower-case letters, "
            f"digits and '-', starting with a letter, at most {DNS_LABEL_MAX} characters"
        )
    return value


def _namespace(value: str) -> str:
    if len(value) > DNS_LABEL_MAX or not DNS_1123_LABEL.fullmatch(value):
        raise ValueError(
            "must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {DNS_LABEL_MAX} characters"
        )
    return value


def _subdomain(value: str) -> str:
    if len(value) > DNS_SUBDOMAIN_MAX or not DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError(
            "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', at most "
            f"{DNS_SUBDOMAIN_MAX} characters"
        )
    return value


def _host_name(value: str) -> str:
    """A host a pod connects to by name or IPv4 address: a DNS-1123 subdomain whose every
    dot-separated label a resolver looks up (RFC 1035 2.3.4: at most 63 octets each)."""
    value = _subdomain(value)
    longest = max(value.split("."), key=len)
    if len(longest) > DNS_LABEL_MAX:
        raise ValueError(
            f"must be a host name or address: its part {longest[:20] + '...'!r} has "
            f"{len(longest)} characters, and a DNS name's parts hold at most {DNS_LABEL_MAX} "
            "(RFC 1035), so no resolver looks it up"
        )
    loopback = value == "localhost" or value.endswith((".localhost", ".localdomain"))
    # A host name's last part is never all digits (RFC 1123 2.1): that is an address, of four
    # numbers 0-255 written plainly (resolvers read 1.2.3 or 010.0.0.1 as other addresses).
    if value.rsplit(".", 1)[-1].isdigit():
        try:
            address = ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(
                "must be a host name or an IPv4 address of four numbers 0-255 (a.b.c.d, no "
                "leading zeros); a name's last part is never all digits (RFC 1123)"
            ) from None
        loopback = address.is_loopback or address.is_unspecified
    if loopback:
        raise ValueError(
            "is the connecting pod's own loopback (RFC 6761, RFC 1122), where nothing listens "
            "unless the pod starts it: give another host's name or address"
        )
    return value


_DOMAIN = re.compile(r"([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def _rbac_security_group(value: str) -> str:
    local, at, domain = value.partition("@")
    if local != RBAC_SECURITY_GROUP_NAME or not at or not _DOMAIN.fullmatch(domain):
        raise ValueError(
            f"must be {RBAC_SECURITY_GROUP_NAME}@<your domain>, in lower case: GKE takes a "
            "group of that name only"
        )
    if len(domain) > DNS_SUBDOMAIN_MAX:
        raise ValueError(
            f"has a domain of {len(domain)} characters; a domain name holds at most "
            f"{DNS_SUBDOMAIN_MAX} (RFC 1035)"
        )
    return value


def _storage_class(value: str) -> str:
    """A claim's class: a StorageClass name, or "" for none (the claim binds to a pre-provisioned
    volume without a class; pkg/apis/core/validation ValidatePersistentVolumeClaimSpec)."""
    return _subdomain(value) if value else value


def _node_name(value: str) -> str:
    if len(value) > DNS_SUBDOMAIN_MAX or not DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError("must be a Kubernetes node name (lower-case DNS subdomain)")
    if len(value) > LABEL_VALUE_MAX:
        raise ValueError(
            f"has {len(value)} characters: the pods' node affinity matches it as a "
            f"kubernetes.io/hostname label value, which holds at most {LABEL_VALUE_MAX}"
        )
    return value


def _priority_class(value: str) -> str:
    """A Kueue WorkloadPriorityClass's name (a DNS-1123 subdomain, as every custom resource's)
    that a run's kueue.x-k8s.io/priority-class label value can hold (at most 63)."""
    if len(value) > LABEL_VALUE_MAX or not DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError(
            "must be a Kueue WorkloadPriorityClass name a run's kueue.x-k8s.io/priority-class "
            "label can hold: a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', "
            f"starting and ending with a letter or digit) of at most {LABEL_VALUE_MAX} characters"
        )
    return value


def _label_key(value: str) -> str:
    problem = qualified_name_problem(value)
    if problem is not None:
        raise ValueError(
            f"must be a label key: an optional DNS subdomain prefix and '/', then at most 63 "
            f"letters, digits, '-', '_' or '.', starting and ending with a letter or digit; it "
            f"{problem}"
        )
    return value


def _topology_level(value: str) -> str:
    value = _label_key(value)
    if len(value) > TOPOLOGY_NODE_LABEL_MAX:
        raise ValueError(
            f"has {len(value)} characters: a Kueue Topology level's nodeLabel holds at most "
            f"{TOPOLOGY_NODE_LABEL_MAX}"
        )
    return value


def _image(value: str) -> str:
    try:
        image = parse_image(value)
    except ValueError as exc:
        raise ValueError(
            f"must be an image reference the kubelet can pull; it {exc} (e.g. "
            "registry.example.com:5000/team/repo:1.2.3 or repo@sha256:<64 hex digits>)"
        ) from None
    if image.digest is None and image.tag is None:
        raise ValueError(
            f"names no tag or digest, so the kubelet pulls ':{IMAGE_DEFAULT_TAG}', which moves; "
            "pin a version tag or a digest"
        )
    if image.digest is None and image.tag == IMAGE_DEFAULT_TAG:
        raise ValueError("':latest' is mutable; pin a version tag or a digest")
    return value


# A first-step pattern is passed on timelineCommand's command line: a line, not a program.
LOG_PATTERN_MAX = 200


def _log_pattern(value: str) -> str:
    if len(value) > LOG_PATTERN_MAX:
        raise ValueError(f"must be at most {LOG_PATTERN_MAX} characters")
    try:
        re.compile(value)
    # A repeat count past the engine's MAXREPEAT is an OverflowError, not an re.error.
    except (re.error, OverflowError) as exc:
        raise ValueError(f"must be a Python regular expression; {exc}") from None
    if re.search(value, ""):
        raise ValueError("matches an empty line, so every line: make it name the step's output")
    return value


def _resource_name(value: str) -> str:
    problem = container_resource_problem(value)
    if problem is not None:
        raise ValueError(
            f"{problem}: Kubernetes refuses it as a container's resource; a device plugin's "
            "resource is an extended resource, <domain>/<name>, e.g. openshift.io/eno5np0rdma"
        )
    if is_native_resource(value):
        raise ValueError(
            "is one of Kubernetes' own resources (unprefixed, or in the kubernetes.io/ "
            "namespace), which no device plugin can register: the kubelet takes extended "
            "resources only; name the NIC's device-plugin resource, e.g. openshift.io/eno5np0rdma"
        )
    if value == GPU_RESOURCE:
        # The training container asks for its GPUs under this name (gpusPerNode): a NIC asking
        # under it too would replace that request in the one resources map, not add to it.
        raise ValueError(
            "is the GPUs' resource (gpusPerNode), not a NIC's; name the NIC's device-plugin "
            "resource, e.g. openshift.io/eno5np0rdma"
        )
    return value


# The pod's scripts read interface names of letters, digits, '_', '.' and '-' only: the names
# reach a shell file they source (scripts/detect-rdma.sh split_devices, preflight.sh check_iface).
_POD_INTERFACE = re.compile(r"[A-Za-z0-9_.-]+")


def _host_interface(value: str) -> str:
    problem = interface_name_problem(value)
    if problem is not None:
        raise ValueError(f"must be a network interface name; it {problem}")
    return value


def _pod_interface(value: str) -> str:
    _host_interface(value)
    if not _POD_INTERFACE.fullmatch(value):
        raise ValueError(
            "must be an interface name of letters, digits, '_', '.' and '-': the pod's scripts "
            "(detect-rdma.sh, preflight.sh) read no other characters"
        )
    return value


# What the program sets in the training container's environment: the rank and rendezvous
# (plan/launch.py rendezvous_env, the pod template's NODE_RANK), the network modes' settings
# (plan/netmodes/ and the GPUDirect releases: RDMA_*, MEMLOCK_*, LD_LIBRARY_PATH) and every
# NCCL_* variable (NCCL is configured by `nccl`, `tcp`, `rdma` and the release; TCPXO's
# profile, sourced at launch, also sets CUDA_VISIBLE_DEVICES, over any value). Of two env
# entries of one name the kubelet keeps the last, the secret's: a secretEnv of one of these names
# would silently replace the program's value. tests/test_secrets.py holds this list to every
# rendered training container.
PROGRAM_ENV_NAMES = frozenset(
    {
        "NODE_RANK",
        "NNODES",
        "GPUS_PER_NODE",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "TORCHRUN_NNODES",
        "TORCHRUN_MAX_RESTARTS",
        "RDZV_ID",
        "DEEPSPEED_HOSTFILE",
        "DEEPSPEED_CONFIG",
        "PREFLIGHT",
        "SHM_MIN_BYTES",
        "MEMLOCK_STRATEGY",
        "MEMLOCK_MACHINE_CONFIG",
        "GDR_REQUIRED",
        "RDMA_GID_INDEX",
        "RDMA_HCAS",
        "RDMA_INTERFACES",
        "RDMA_MTU",
        "LD_LIBRARY_PATH",
        # A JobSet pod's admission gate (scripts/admitted.sh): a secret of the name would let a
        # run Kueue never admitted train.
        "KUEUE_PODSET",
        "POD_NAMESPACE",
        # The run's metrics (monitoring.runMetrics, scripts/run_metrics.py): its port and step
        # pattern, and its series' labels.
        "RUN_METRICS_PORT",
        "RUN_METRICS_STEP_PATTERN",
        "RUN_NAME",
        "RUN_RESTART_ATTEMPT",
        "NODE_NAME",
    }
)
PROGRAM_ENV_PREFIX = "NCCL_"


def _secret_env_name(value: str) -> str:
    if not ENV_VAR_NAME.fullmatch(value):
        raise ValueError(
            "must be an environment variable name: printable ASCII characters other than '='"
        )
    if value in PROGRAM_ENV_NAMES or value.startswith(PROGRAM_ENV_PREFIX):
        raise ValueError(
            "is a variable the program sets in the training container (its rank, rendezvous, "
            f"network or {PROGRAM_ENV_PREFIX}* settings), which a secret of that name would "
            "replace: give the secret another name"
        )
    problem = config_map_key_problem(value)
    if problem is not None:
        raise ValueError(
            f"is also the key of the Secret <name>-env that holds its token, and it {problem}, "
            "which Kubernetes refuses in a Secret key"
        )
    return value


def _sync_period(value: str) -> str:
    try:
        period = parse_go_duration(value)
    except ValueError:
        raise ValueError(
            "must be a Go duration, as git-sync reads it: numbers with units ns, us, ms, s, m or "
            "h, e.g. 60s, 1m30s or 1.5h"
        ) from None
    if period < GIT_SYNC_MIN_PERIOD_NS:
        raise ValueError("must be at least 10ms (git-sync stops on a shorter period)")
    return value


def _cidr(value: str) -> str:
    if "/" not in value:
        raise ValueError("must be an IPv4 CIDR with a prefix length, e.g. 10.0.0.0/8")
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"must be an IPv4 CIDR with no host bits set ({exc})") from None
    return str(network)


def _private_cidr(value: str) -> str:
    network = ipaddress.IPv4Network(_cidr(value))
    if not any(network.subnet_of(r) for r in USABLE_PRIVATE_RANGES):
        raise ValueError(
            "must lie inside a private range (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or "
            "100.64.0.0/10)"
        )
    return str(network)


def _bucket_name(value: str) -> str:
    if not BUCKET_NAME.fullmatch(value):
        raise ValueError(
            "must be a Cloud Storage bucket name: 3-63 lower-case letters, digits, '-' and '_', "
            "starting and ending with a letter or digit (names with dots need a verified domain "
            "and are not taken here)"
        )
    if value.startswith("goog") or BUCKET_NAME_FORBIDDEN.search(value):
        raise ValueError("Cloud Storage refuses bucket names starting with 'goog' or with 'google'")
    return value


def _mount_path(value: str) -> str:
    """An absolute path in normal form: a volume mounted at `/a/../b` or `/a/` is one the API
    server takes but a reader would not recognise, and `/` would hide the image."""
    parts = value.split("/")
    if not value.startswith("/") or value == "/" or any(p in ("", ".", "..") for p in parts[1:]):
        raise ValueError(
            "must be an absolute path below / with no empty, '.' or '..' parts and no trailing "
            "'/', e.g. /data"
        )
    longest = max(parts, key=lambda p: len(p.encode()))
    if len(longest.encode()) > PATH_PART_MAX_BYTES:
        raise ValueError(
            f"has a part of {len(longest.encode())} bytes ({longest[:20] + '...'!r}): a file "
            f"name holds at most {PATH_PART_MAX_BYTES} (Linux NAME_MAX), so no directory there "
            "can be made"
        )
    return value


def _one_of(value: Any, allowed: list[str]) -> Any:
    """`value` if one of `allowed` (read when validating, so a record registered later counts),
    refused with the words and order pydantic gives a Literal."""
    if isinstance(value, str) and value in allowed:
        return value
    names = [repr(name) for name in allowed]
    expected = " or ".join(filter(None, (", ".join(names[:-1]), names[-1])))
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


def _machine_type(value: Any) -> Any:
    return _one_of(value, list(MACHINES))


def _network_mode(value: Any) -> Any:
    return _one_of(value, mode_names())


def _release_at_least(minimum: tuple[int, int, int], why: str) -> Callable[[str], str]:
    """A chart's release version (MAJOR.MINOR.PATCH, no `v`, as Helm charts are versioned), no
    older than `minimum`."""

    def check(value: str) -> str:
        match = re.fullmatch(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)", value)
        if match is None:
            raise ValueError("must be a release's chart version, MAJOR.MINOR.PATCH, e.g. 0.19.2")
        if tuple(map(int, match.groups())) < minimum:
            raise ValueError(f"must be {release_text(minimum)} or later: {why}")
        return value

    return check


Quantity = Annotated[str, BeforeValidator(quantity_text), AfterValidator(check_quantity)]
CpuQuantity = Annotated[Quantity, AfterValidator(check_cpu)]
Size = Annotated[
    str, BeforeValidator(quantity_text), AfterValidator(check_quantity), AfterValidator(check_size)
]
DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Namespace = Annotated[str, AfterValidator(_namespace)]
Subdomain = Annotated[str, AfterValidator(_subdomain)]
HostName = Annotated[str, AfterValidator(_host_name)]
RbacSecurityGroup = Annotated[str, AfterValidator(_rbac_security_group)]
StorageClassName = Annotated[str, AfterValidator(_storage_class)]
NodeName = Annotated[str, AfterValidator(_node_name)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
PriorityClassName = Annotated[str, AfterValidator(_priority_class)]
TopologyLevel = Annotated[str, AfterValidator(_topology_level)]  # a Kueue Topology level
Image = Annotated[str, AfterValidator(_image)]
LogPattern = Annotated[str, AfterValidator(_log_pattern)]

# A node health check whose result and time labels the gate reads: cluster-health-scanner's
# (scripts/node_health_gate.py RESULT_LABEL, TIME_LABEL).
HealthCheck = Literal["gpu", "nccl", "neper"]
SyncPeriod = Annotated[str, AfterValidator(_sync_period)]
SweepSize = Annotated[str, BeforeValidator(integer_text), AfterValidator(check_sweep_size)]
ResourceName = Annotated[str, AfterValidator(_resource_name)]
Cidr = Annotated[str, AfterValidator(_cidr)]
PrivateCidr = Annotated[str, AfterValidator(_private_cidr)]
Interface = Annotated[str, AfterValidator(_pod_interface)]  # an interface in the pod
HostInterface = Annotated[str, AfterValidator(_host_interface)]  # a node's interface
EnvName = Annotated[str, AfterValidator(_secret_env_name)]  # a secretEnv variable
BucketName = Annotated[str, AfterValidator(_bucket_name)]
MountPath = Annotated[str, AfterValidator(_mount_path)]
MachineType = Annotated[str, BeforeValidator(_machine_type)]  # a GPU machine (facts/machines.py)
NetworkMode = Annotated[str, BeforeValidator(_network_mode)]  # a plug-in's (config/netmodes/)
# Kueue's and JobSet's chart versions (workload.controllers).
_KUEUE_OLDEST = "the first to serve kueue.x-k8s.io/v1beta2, which the stack writes"
_JOBSET_OLDEST = "the oldest release the program is tested with"
KueueVersion = Annotated[str, AfterValidator(_release_at_least(KUEUE_MIN_VERSION, _KUEUE_OLDEST))]
JobSetVersion = Annotated[
    str, AfterValidator(_release_at_least(JOBSET_MIN_VERSION, _JOBSET_OLDEST))
]
