"""Kubernetes' own rules for the values a stack names (quantities, names, label keys, resource
names, namespaces), those of what runs beside it (the kubelet's image references, the kernel's
and the CNI's interface names, git-sync's period), and the versions that brought the features
the program relies on."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

# apps.kubernetes.io/pod-index pod label: beta (on by default) in Kubernetes 1.28.
MIN_KUBERNETES_MINOR = 28
# Native sidecars (init containers with restartPolicy Always): on by default from 1.29.
NATIVE_SIDECAR_MINOR = 29
# ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1): stable from 1.30
# (kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy).
ADMISSION_POLICY_MINOR = 30
# The StatefulSet controller labels each pod controller-revision-hash=<name>-<hash>, the hash up
# to 10 characters, and a label value holds 63 (kubernetes/kubernetes
# pkg/controller/history/controller_history.go ControllerRevisionName; issue #64023).
STATEFULSET_NAME_MAX = 63 - len("-") - 10
# The resource NVIDIA's device plugin advertises GPUs as (NVIDIA/k8s-device-plugin README,
# "Running GPU Jobs"); GKE's GPU plugin uses the same name.
GPU_RESOURCE = "nvidia.com/gpu"
# The pod's primary (cluster network) interface: CNI plugins and Multus name it eth0.
POD_PRIMARY_INTERFACE = "eth0"
# How long `pulumi up` waits for training pods by default; the provider's own default is 10 min
# (pulumi/pulumi-kubernetes provider/pkg/await/statefulset.go DefaultStatefulSetTimeoutMins). A
# new GPU node first pulls the whole training image: 5-15 min for the 10-50 GB of AI/ML images
# (kubernetes.recipes/recipes/configuration/image-pull-optimization-kubernetes); twice the top of
# that leaves room for the claims' disks and the init containers.
POD_START_MINUTES = 30

# The patterns below are whole-string rules: use them with fullmatch. Go's `$` matches only at
# the end of the text, Python's also before a final newline ("team\n" would pass `match`).

# Namespaces the API server creates in every cluster (kubernetes/kubernetes v1.35.4
# pkg/controlplane/apiserver/options/options.go SystemNamespaces, and kube-node-lease from
# cmd/kube-apiserver/app/options/options.go): creating one fails with AlreadyExists.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# The groups and user the API server gives requests by who made them, not by whom
# (kubernetes.io/docs/reference/access-authn-authz/authentication, "Anonymous requests" and
# "Service account tokens"; staging/src/k8s.io/apiserver/pkg/authentication/user/user.go
# AllAuthenticated, AllUnauthenticated, Anonymous; serviceaccount/util.go AllServiceAccountsGroup,
# ServiceAccountGroupPrefix, ServiceAccountUsernamePrefix).
EVERYONE_GROUPS = ("system:authenticated", "system:unauthenticated", "system:serviceaccounts")
ANONYMOUS_USER = "system:anonymous"
SERVICE_ACCOUNTS_GROUP_PREFIX = "system:serviceaccounts:"
SERVICE_ACCOUNT_USER_PREFIX = "system:serviceaccount:"
# Kubernetes keeps kube-* for its own namespaces (kubernetes/website d402f4b
# content/en/docs/concepts/overview/working-with-objects/namespaces.md: "Avoid creating
# namespaces with the prefix kube-").
KUBERNETES_NAMESPACE_PREFIXES = ("kube-",)
# Namespace names each platform keeps for itself: (names, prefixes).
PLATFORM_NAMESPACES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # A project request refuses them (openshift/openshift-apiserver 08af395
    # pkg/project/apiserver/registry/projectrequest/delegated/delegated.go ForbiddenNames,
    # ForbiddenPrefixes); OpenShift's operators run in openshift-*.
    "openshift": (("openshift", "kubernetes", "kube"), ("openshift-", "kubernetes-", "kube-")),
    # Managed Service for Prometheus: gmp-system, gmp-public (GoogleCloudPlatform/prometheus-engine
    # 8412dd6 pkg/operator/operator.go); GKE's managed namespaces are gke-* (gke-managed-system,
    # gke-gmp-system, ...), where GKE Warden refuses writes ("managed-namespaces-limitation",
    # quoted in tailscale/tailscale#9475).
    "gke": (("gmp-system", "gmp-public"), ("gke-",)),
}

# Network interface names: at most 15 bytes (IFNAMSIZ, 16 with the NUL), not "." or "..", no
# '/', ':' or whitespace (torvalds/linux net/core/dev.c dev_valid_name); the CNI checks a pod's
# CNI_IFNAME the same way (containernetworking/cni 3f51e88 pkg/utils/utils.go
# ValidateInterfaceName). The kernel's isspace goes byte by byte (lib/ctype.c: \t to \r, space
# and Latin-1's no-break space 0xa0), and a '%' makes a new name a template it numbers
# (dev_get_valid_name), so no interface is named with one.
IFNAME_MAX_BYTES = 15
IFNAME_FORBIDDEN_BYTES = frozenset(b"/:%\0\t\n\v\f\r \xa0")
# A file or directory name: at most 255 bytes (NAME_MAX, torvalds/linux include/uapi/linux/
# limits.h; ext4, XFS, Lustre and gcsfuse's mounts refuse a longer one with ENAMETOOLONG), so
# no mount point or checkpoint directory has a longer part.
PATH_PART_MAX_BYTES = 255

# Environment variable names: printable ASCII but '=' (apimachinery IsRelaxedEnvVarName; the
# API server uses it since RelaxedEnvironmentVariableValidation went GA, locked on, in 1.34).
ENV_VAR_NAME = re.compile(r"[\x20-\x3c\x3e-\x7e]+")
# Secret and ConfigMap keys (IsConfigMapKey): letters, digits, '-', '_' and '.', at most 253, not
# "." or ".." nor starting with "..".
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
CONFIG_MAP_KEY_MAX = 253

# Go durations as time.ParseDuration reads them (golang/go src/time/format.go): an optional
# sign, then numbers (digits, '.' and digits, one side at least) each with a unit, or "0".
GO_DURATION_UNITS = {
    **{"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6},
    **{"s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9},
}
_GO_DURATION_PART = re.compile(r"(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?(?P<unit>[^0-9.]*)")
# git-sync reads GITSYNC_PERIOD with time.ParseDuration and stops on a period below 10ms
# (kubernetes/git-sync main.go, v4: "--period must be at least 10ms").
GIT_SYNC_MIN_PERIOD_NS = 10 * 10**6

# Quantities as kubernetes/apimachinery pkg/api/resource/quantity.go reads them (v0.35.4,
# parseQuantityString): a sign, digits, '.' and digits (each part may be empty: "Gi", "+" and "."
# read as 0), then suffix letters, a sign and digits, all of which must name a suffix.
QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)"
)
# The suffixes (suffix.go newSuffixer): binary SI, decimal SI, or e/E and an int64 exponent that
# Kubernetes keeps in 32 bits (interpret: int32(parsed)).
_BINARY_SUFFIX = {s: 10 * (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))}
_DECIMAL_SUFFIX = {
    **{"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6},
    **{"G": 9, "T": 12, "P": 15, "E": 18},
}
_EXPONENT_SUFFIX = re.compile(r"[eE](?P<exponent>[+-]?[0-9]+)")
# ParseQuantity rounds up (away from zero) to 1n; a binary SI value is capped at 2^63 - 1
# (math.go maxAllowed); 64-bit readers (Quantity.Value, MilliValue) overflow past it.
QUANTITY_MAX = 2**63 - 1
QUANTITY_MIN_STEP = Fraction(1, 10**9)
# Container requests and limits and claim sizes are ResourceLists: the API server rounds them up
# to 1m before it validates them (kubernetes/kubernetes pkg/apis/core/v1/defaults.go
# SetDefaults_ResourceList, v1.35.4), so a request and its limit are compared in milli units.
RESOURCE_LIST_STEP = Fraction(1, 1000)
# Strings in a request body reach Quantity.UnmarshalJSON as their JSON text, which trims
# whitespace (quantity.go): spaces, the one kind every JSON encoder leaves unescaped.
QUANTITY_JSON_PADDING = " "

# CPU is read in millicores (quantity.go MilliValue, which overflows an int64 above
# MaxMilliValue, math.go): at most QUANTITY_MAX thousandths of a core.
CPU_QUANTITY_MAX = Fraction(QUANTITY_MAX, 1000)
# DNS-1035 label: Service names and names that become GCP resource names
# (kubernetes/apimachinery v0.35.4 pkg/api/validate/content/dns.go IsDNS1035Label).
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# DNS-1123 label: namespaces (IsDNS1123Label; may start with a digit).
DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Label keys and values (content/kube.go IsLabelKey, IsLabelValue): 63 characters per name part.
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE_MAX = 63
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
# Image references in distribution/reference's grammar (github.com/distribution/reference v0.6.0
# regexp.go; Go's \w is ASCII): [domain[:port]/]path[:tag][@digest], a path component lower-case
# alphanumerics joined by '.', '_', '__' or runs of '-'.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
IMAGE_NAME = re.compile(
    rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
)
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>{IMAGE_NAME.pattern})(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}))?"
)
# RepositoryNameTotalLengthMax (distribution/reference reference.go): the path, without the
# domain, at most 255.
IMAGE_PATH_MAX = 255
# The kubelet reads images with ParseNormalizedNamed (kubernetes/kubernetes v1.35.4
# pkg/util/parsers/parsers.go ParseImageName, which links sha256 and sha512 in); a digest's
# algorithm must be one it can verify, in lower-case hex of its length
# (opencontainers/go-digest v1.0.0 algorithm.go), and no tag or digest means :latest.
IMAGE_DIGESTS = {"sha256": 64, "sha384": 96, "sha512": 128}
IMAGE_DEFAULT_TAG = "latest"
# normalize.go splitDockerDomain: a first component is a registry when it is localhost, has a
# '.' or ':', or has upper-case letters; else the image is on Docker Hub, under library/ when
# it has no namespace.
DOCKER_HUB = ("docker.io", "index.docker.io")  # the registry, and its legacy name
DOCKER_HUB_OFFICIAL = "library/"
# Resource names (kubernetes/kubernetes pkg/apis/core/helper/helpers.go, v1.35.4). Kubernetes'
# own are unprefixed or have "kubernetes.io/" anywhere in them (IsNativeResource); a container
# may request the unprefixed cpu, memory, ephemeral-storage and hugepages-<size>
# (IsStandardContainerResourceName).
RESOURCE_DEFAULT_NAMESPACE = "kubernetes.io/"
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGE_PAGES_PREFIX = "hugepages-"
# Every other resource is extended: it must not start with "requests." (ResourceQuota's prefix),
# and "requests.<name>", its name in a quota, must be a qualified name too
# (IsExtendedResourceName). Only extended resources can a device plugin register
# (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go Register).
RESOURCE_QUOTA_PREFIX = "requests."


def interface_name_problem(name: str) -> str | None:
    """Why no network interface can have `name`, None when one can."""
    raw = name.encode()
    if not raw:
        return "is empty"
    if len(raw) > IFNAME_MAX_BYTES:
        return f"has {len(raw)} bytes; an interface name has at most {IFNAME_MAX_BYTES}"
    if name in (".", ".."):
        return f"is {name!r}"
    forbidden = sorted({c for c in name if set(c.encode()) & IFNAME_FORBIDDEN_BYTES})
    if forbidden:
        return (
            f"has {', '.join(map(repr, forbidden))}: the kernel refuses '/', ':', '%' and "
            "whitespace bytes (0xa0 among them) in interface names"
        )
    return None


def parse_go_duration(text: str) -> int:
    """Nanoseconds of a Go duration, as time.ParseDuration reads it; ValueError when it fails."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if body == "0":
        return 0
    if not body:
        raise ValueError(f"not a Go duration: {text!r}")
    total, rest = 0, body
    while rest:
        part = _GO_DURATION_PART.match(rest)
        assert part is not None  # every group may be empty
        whole, fraction, unit = part["whole"], part["fraction"], part["unit"]
        if not (whole or fraction) or unit not in GO_DURATION_UNITS:
            raise ValueError(f"not a Go duration: {text!r}")
        value, scale = int(whole or "0"), GO_DURATION_UNITS[unit]
        if value > (2**63) // scale:
            raise ValueError(f"Go duration out of range: {text!r}")
        # leadingFraction keeps digits while they fit in 63 bits; the part is added in float64.
        digits, places = 0, 1.0
        for digit in fraction or "":
            if digits * 10 + int(digit) > 2**63 - 1:
                break
            digits, places = digits * 10 + int(digit), places * 10
        total += value * scale + int(digits * (scale / places))
        if total > 2**63:
            raise ValueError(f"Go duration out of range: {text!r}")
        rest = rest[part.end() :]
    if text[:1] != "-" and total > 2**63 - 1:
        raise ValueError(f"Go duration out of range: {text!r}")
    return -total if text[:1] == "-" else total


def config_map_key_problem(key: str) -> str | None:
    """Why `key` cannot key a Secret or ConfigMap, None when it can."""
    if not CONFIG_MAP_KEY.fullmatch(key) or len(key) > CONFIG_MAP_KEY_MAX:
        return f"is not 1 to {CONFIG_MAP_KEY_MAX} letters, digits, '-', '_' and '.'"
    if key in (".", "..") or key.startswith(".."):
        return "is '.' or '..' or starts with '..'"
    return None


def qualified_name_problem(value: str) -> str | None:
    """Why `value` is no qualified name (a label key, a resource name), None when it is one
    (kubernetes/apimachinery pkg/api/validate/content/kube.go IsLabelKey, v0.35.4)."""
    parts = value.split("/")
    if len(parts) > 2:
        return "has more than one '/'"
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "has an empty prefix before '/'"
        if len(prefix) > DNS_SUBDOMAIN_MAX or not DNS_SUBDOMAIN.fullmatch(prefix):
            return (
                "has a prefix that is no DNS-1123 subdomain (lower-case letters, digits, '-' and "
                f"'.', starting and ending with a letter or digit, at most {DNS_SUBDOMAIN_MAX})"
            )
    name = parts[-1]
    if not name:
        return "has an empty name part"
    if len(name) > LABEL_VALUE_MAX or not QUALIFIED_NAME.fullmatch(name):
        return (
            f"has a name part that is not 1 to {LABEL_VALUE_MAX} letters, digits, '-', '_' or "
            "'.', starting and ending with a letter or digit"
        )
    return None


def is_native_resource(name: str) -> bool:
    """Kubernetes' own resource: unprefixed, or in the kubernetes.io/ namespace."""
    return "/" not in name or RESOURCE_DEFAULT_NAMESPACE in name


def container_resource_problem(name: str) -> str | None:
    """Why the API server refuses `name` in a container's requests or limits, None when it takes
    it (pkg/apis/core/validation/validation.go validateContainerResourceName, v1.35.4)."""
    problem = qualified_name_problem(name)
    if problem is not None:
        return problem
    if "/" not in name:
        if name in STANDARD_CONTAINER_RESOURCES or name.startswith(HUGE_PAGES_PREFIX):
            return None
        return "is no standard container resource and has no '<domain>/' prefix"
    if is_native_resource(name):
        return None
    if name.startswith(RESOURCE_QUOTA_PREFIX):
        return f"starts with {RESOURCE_QUOTA_PREFIX!r}, ResourceQuota's prefix for requests"
    if qualified_name_problem(RESOURCE_QUOTA_PREFIX + name) is not None:
        return (
            f"has a prefix longer than {DNS_SUBDOMAIN_MAX - len(RESOURCE_QUOTA_PREFIX)} "
            f"characters: its quota name {RESOURCE_QUOTA_PREFIX}<name> must be a qualified name"
        )
    return None


@dataclass(frozen=True)
class ImageReference:
    """An image as the kubelet reads it: the normalized name, and the tag and digest written."""

    name: str
    tag: str | None
    digest: str | None


def parse_image(text: str) -> ImageReference:
    """The image `text` names, as the kubelet parses it; ValueError saying why it cannot."""
    if re.fullmatch(r"[a-f0-9]{64}", text):
        raise ValueError("is 64 hexadecimal digits, which the kubelet reads as an image ID")
    first, slash, rest = text.partition("/")
    if not slash:
        domain, remainder = DOCKER_HUB[0], text
    elif first == DOCKER_HUB[1]:
        domain, remainder = DOCKER_HUB[0], rest
    elif first == "localhost" or set(first) & {".", ":"} or first.lower() != first:
        domain, remainder = first, rest
    else:
        domain, remainder = DOCKER_HUB[0], text
    if domain == DOCKER_HUB[0] and "/" not in remainder:
        remainder = DOCKER_HUB_OFFICIAL + remainder
    if remainder.partition(":")[0].lower() != remainder.partition(":")[0]:
        raise ValueError("has upper-case letters in its repository path")
    match = IMAGE_REFERENCE.fullmatch(f"{domain}/{remainder}")
    if match is None:
        raise ValueError("is not in the image reference grammar")
    name = IMAGE_NAME.fullmatch(match["name"])
    assert name is not None  # the reference's name part is a name
    if len(name["path"]) > IMAGE_PATH_MAX:
        raise ValueError(f"has a repository path longer than {IMAGE_PATH_MAX} characters")
    if match["digest"]:
        algorithm, _, encoded = match["digest"].partition(":")
        length = IMAGE_DIGESTS.get(algorithm)
        if length is None:
            raise ValueError(
                f"has a {algorithm} digest; the kubelet verifies sha256, sha384, sha512"
            )
        if not re.fullmatch(f"[a-f0-9]{{{length}}}", encoded):
            raise ValueError(f"has a {algorithm} digest that is not {length} lower-case hex digits")
    return ImageReference(match["name"], match["tag"], match["digest"])


class QuantityRangeError(ValueError):
    """Kubernetes parses the text but does not hold the number it writes: beyond 2^63 - 1 (capped,
    or overflowing its 64-bit readers; an exponent past 32 bits wraps), or a non-zero amount
    below 1n (rounded up)."""


def parse_quantity(text: str) -> Fraction:
    """The value Kubernetes reads from a quantity (rounded up to 1n); ValueError when it refuses
    the text, QuantityRangeError when it does not hold the number written."""
    match = QUANTITY.fullmatch(text)
    if not text or match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    base, exponent = _suffix(match["suffix"])
    whole, fraction = match["whole"], match["fraction"] or ""
    digits = (whole + fraction).lstrip("0")
    if not whole + fraction and (exponent >= 50 if base == 2 else int32(exponent) < -9):
        # No digits: the int64 path reads 0, the inf.Dec path (binary suffixes from Pi,
        # exponents below -9) fails ("unable to parse numeric part of quantity").
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    if not digits:
        return Fraction(0)
    # The magnitude first, so that 1e2147483647 is not worked out digit by digit.
    leading = len(whole + fraction) - len(digits)
    magnitude = len(whole) - leading - 1 + exponent * math.log10(base)
    if magnitude > 19:
        raise QuantityRangeError(f"above {QUANTITY_MAX}: {text!r}")
    if magnitude < -10:
        raise QuantityRangeError(f"below 1n: {text!r}")
    value = Fraction(int(whole + fraction), 10 ** len(fraction)) * Fraction(base) ** exponent
    if value > QUANTITY_MAX:
        raise QuantityRangeError(f"above {QUANTITY_MAX}: {text!r}")
    if value < QUANTITY_MIN_STEP:
        raise QuantityRangeError(f"below 1n: {text!r}")
    value = round_up(value, QUANTITY_MIN_STEP)
    return -value if match["sign"] == "-" else value


def resource_quantity(text: str) -> Fraction:
    """A quantity's value in a ResourceList, as the API server validates it (RESOURCE_LIST_STEP)."""
    return round_up(parse_quantity(text), RESOURCE_LIST_STEP)


def round_up(value: Fraction, step: Fraction) -> Fraction:
    """`value` rounded away from zero to a multiple of `step` (inf.RoundUp)."""
    steps = math.ceil(abs(value) / step)
    return steps * step if value >= 0 else -steps * step


def int32(number: int) -> int:
    """`number` as Go's int32(number) keeps it: the low 32 bits, two's complement."""
    return (number + 2**31) % 2**32 - 2**31


def _suffix(suffix: str) -> tuple[int, int]:
    """(base, exponent) of a quantity's suffix; ValueError when Kubernetes knows no such suffix."""
    if suffix in _BINARY_SUFFIX:
        return 2, _BINARY_SUFFIX[suffix]
    if suffix in _DECIMAL_SUFFIX:
        return 10, _DECIMAL_SUFFIX[suffix]
    match = _EXPONENT_SUFFIX.fullmatch(suffix)
    if match is None or not -(2**63) <= int(match["exponent"]) < 2**63:  # strconv.ParseInt
        raise ValueError(f"not a quantity suffix: {suffix!r}")
    return 10, int(match["exponent"])


# The recommended label naming an application's instance, here the stack's run (kubernetes
# website content/en/docs/concepts/overview/working-with-objects/common-labels.md).
INSTANCE_LABEL = "app.kubernetes.io/instance"
# The same page's label for the part an object plays (training, node-health-gate, ...).
COMPONENT_LABEL = "app.kubernetes.io/component"

# Where the kubelet reads a container's termination message from by default
# (k8s.io/api core/v1 types.go Container.terminationMessagePath; kubernetes.io/docs/tasks/
# debug/debug-application/determine-reason-pod-failure).
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
