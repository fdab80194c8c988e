"""Values generated from the grammars the stack's value types stand for, each labelled with what
its construction makes it: the offline tests (tests/test_values.py) hold the program's value
types to the labels, and the real tier (tests/real/test_value_contract.py) holds the labels, and
the program, to the real API server.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

from gpu_cluster.facts.kubernetes import int32

# --- quantities: kubernetes/apimachinery pkg/api/resource/quantity.go -----------------------

SIGNS = ("", "+", "-")
# <number> ::= <digits> | <digits>.<digits> | <digits>. | .<digits>; ParseQuantity also reads a
# number with no digits at all ("", ".") as 0.
NUMBERS = ("0", "5", "007", "1234567", "1.", "1.5", ".5", "0.000000001", "123456789.123456789")
DIGITLESS = ("", ".")
BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>: around 1n, 1 and 2^63, and past
# 32 bits (Kubernetes keeps the exponent in an int32: 4294967296 wraps to 0).
EXPONENTS = ("e3", "E3", "e+3", "e-3", "E-12", "e0", "e03", "e-9", "e-10", "e18", "e19")
WRAPPING_EXPONENTS = ("e4294967296", "e-4294967296", "e9223372036854775807")
# Texts that are no quantity, each a way of leaving the grammar.
NOT_QUANTITIES = (
    "5K",  # the kilo suffix is k; K is no suffix
    "5ki",
    "5KI",
    "5gi",
    "5mi",
    "5GiB",
    "5Gi3",
    "5k3",
    "5e",  # an exponent needs digits
    "5E+",
    "5ee3",
    "5eE3",
    "5e3.5",
    "5e9223372036854775808",  # beyond int64: strconv.ParseInt fails
    "+-5",
    "--5",
    "5-",
    "5+1",
    "5.5.5",
    "1,5",
    "0x10",
    "5 Gi",
    "\t5Gi",  # whitespace other than spaces: JSON encoders escape it, so nothing trims it
    "5Gi\n",
    "\u00a05Gi",
    "\u0663",  # ARABIC-INDIC DIGIT THREE: digits are ASCII
    "five",
    "",
)


@dataclass(frozen=True)
class Quantity:
    """A quantity text and the number it writes: mantissa x base^exponent (None: no quantity)."""

    text: str
    mantissa: Fraction | None
    base: int = 10
    exponent: int = 0
    digits: bool = True

    @property
    def written(self) -> Fraction | None:
        """The exact number, for exponents small enough to work out (None otherwise)."""
        if self.mantissa is None or (self.mantissa and abs(self.exponent) > 100):
            return None
        return (
            self.mantissa * Fraction(self.base) ** self.exponent if self.mantissa else Fraction(0)
        )


def _number(sign: str, number: str) -> Fraction:
    whole, _, fraction = number.partition(".")
    value = Fraction(f"{whole or '0'}.{fraction or '0'}")
    return -value if sign == "-" else value


def _suffixes() -> list[tuple[str, int, int]]:
    return [
        *((s, 2, e) for s, e in BINARY_SI.items()),
        *((s, 10, e) for s, e in DECIMAL_SI.items()),
        *((s, 10, int(s[1:])) for s in (*EXPONENTS, *WRAPPING_EXPONENTS)),
    ]


def _digitless_reads_zero(base: int, exponent: int) -> bool:
    """ParseQuantity reads a number without digits as 0 on its int64 path; its inf.Dec path
    (binary suffixes from Pi on, scales below 1n) cannot parse it."""
    return exponent < 50 if base == 2 else int32(exponent) >= -9


def quantities() -> list[Quantity]:
    """Every sign x number x suffix of the grammar, digitless numbers, space-padded ones (the API
    server trims spaces), and texts that leave the grammar."""
    out = [
        Quantity(sign + number + suffix, _number(sign, number), base, exponent)
        for sign, number, (suffix, base, exponent) in itertools.product(SIGNS, NUMBERS, _suffixes())
    ]
    out += [
        Quantity(
            sign + number + suffix,
            Fraction(0) if _digitless_reads_zero(base, exponent) else None,
            base,
            exponent,
            digits=False,
        )
        for sign, number, (suffix, base, exponent) in itertools.product(
            SIGNS, DIGITLESS, _suffixes()
        )
        if sign + number + suffix  # "" is no quantity (ParseQuantity: ErrFormatWrong)
    ]
    out += [
        Quantity(padded, Fraction(5), 2, 30)
        for padded in (" 5Gi", "5Gi ", "  5Gi  ")  # Quantity.UnmarshalJSON trims the spaces
    ]
    out += [Quantity(text, None) for text in NOT_QUANTITIES]
    return out


# Requests and limits near equality, in several notations: the API server compares them after
# rounding both up to 1m (SetDefaults_ResourceList).
REQUEST_LIMIT_PAIRS = [
    (request, limit)
    for request, limit in itertools.product(
        ("1", "1000m", "1.0001", "1.0005", "1.001", "1.0011", "1001m", "1000000001n", "1e0"),
        ("1", "1.0001", "1.001", "1000001u"),
    )
] + [("2G", "1.9Gi"), ("1Ki", "1.024k"), ("1025", "1Ki"), ("1Mi", "1048576"), ("1E", "1Ei")]


# --- fabric-check sizes: scripts/allreduce_check.py parse_size ------------------------------

SWEEP_UNITS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def sweep_sizes() -> list[tuple[str, int | None]]:
    """(text, bytes the check script reads, None when it reads none): digits, a unit in either
    case, B or iB in any case (also without a unit: "8iB" is 8), whitespace around and before
    the unit; and near misses."""
    out: list[tuple[str, int | None]] = []
    for number, unit, tail in itertools.product(
        ("0", "4", "8", "0008", "64", "1024"),
        [u for letter in SWEEP_UNITS for u in {letter, letter.upper()}],
        ("", "b", "B", "ib", "iB", "IB"),
    ):
        out.append((number + unit + tail, int(number) << SWEEP_UNITS[unit.lower()]))
    out += [(" 64M", 64 << 20), ("64M\t", 64 << 20), ("64 M", 64 << 20), ("1 GiB ", 1 << 30)]
    out += [
        (text, None)
        for text in ("", "G", "1.5G", "-8", "+8", "8P", "8bi", "8KiBx", "8 K B", "1e9", "8 8")
    ]
    return out


# --- names: kubernetes/apimachinery pkg/api/validate/content (dns.go, kube.go) -------------


@dataclass(frozen=True)
class Name:
    """A generated name: whether the API server takes it where the stack puts it, and, when the
    program refuses it all the same, what its message says about why."""

    value: str
    kubernetes: bool
    needs_more: str = ""


def label(length: int) -> str:
    """A DNS-1123 label of `length` (lower-case letters, digits and '-', inner only)."""
    body = ("a-0b" * length)[: max(length - 2, 0)]
    return ("x" + body + "9")[:length] if length > 1 else "x"[:length]


def subdomain(length: int) -> str:
    """A DNS-1123 subdomain of `length`: labels of up to 63 joined by dots."""
    parts, left = [], length
    while left > 0:
        size = min(63, left if left <= 63 else left - 2)  # never leave a lone dot
        parts.append(label(size))
        left -= size + 1
    return ".".join(parts)


def qualified(length: int) -> str:
    """A qualified name part of `length`: letters in both cases, digits, '-', '_', '.'."""
    body = ("B-c_D.e" * length)[: max(length - 2, 0)]
    return ("A" + body + "z")[:length] if length > 1 else "A"[:length]


QUALIFIED_NAME_PARTS = ("x", "eno5np0rdma", "rdma_shared_device_a", "Foo_Bar.baz", "9", "a-b")
BAD_NAME_PARTS = ("-x", "x-", ".x", "_x", "x y", "x\u00e9", "x/y")
SUBDOMAIN_PREFIXES = ("example.com", "openshift.io", "rdma", "0vendor.io", "a-b.c-d", "nvidia.com")
BAD_PREFIXES = (
    "Example.com",
    "ex_ample.com",
    "-example.com",
    "example.com.",
    "example..com",
    "exa mple.com",
)


def label_keys() -> list[Name]:
    """Qualified names: an optional subdomain prefix and '/', a name part of at most 63."""
    names = [*QUALIFIED_NAME_PARTS[:-1], qualified(63)]
    out = [Name(n, True) for n in names]
    out += [Name(f"{p}/{n}", True) for p in (*SUBDOMAIN_PREFIXES, subdomain(253)) for n in names]
    out += [Name(f"kubernetes.io/{n}", True) for n in ("hostname", "arch")]
    out += [Name(qualified(64), False), Name("example.com/" + qualified(64), False)]
    out += [Name(f"{subdomain(254)}/x", False)]
    out += [Name(f"{p}/x", False) for p in BAD_PREFIXES]
    out += [Name(f"example.com/{n}", False) for n in BAD_NAME_PARTS]
    out += [Name(n, False) for n in BAD_NAME_PARTS[:-1]]
    out += [Name(v, False) for v in ("", "/", "/x", "x/", "a/b/c", "gpu\n")]
    return out


# What the program says when the API server would take a resource the stack cannot use.
NATIVE_RESOURCE = "one of Kubernetes' own resources"


def resource_names() -> list[Name]:
    """Names a container may request: extended resources (<domain>/<name>, the prefix at most
    244 so that requests.<name> stays a qualified name), Kubernetes' own ones (unprefixed, or
    kubernetes.io/ anywhere in them), and each way of leaving those rules."""
    names = [*QUALIFIED_NAME_PARTS[:-1], qualified(63)]
    out = [Name(f"{p}/{n}", True) for p in (*SUBDOMAIN_PREFIXES, subdomain(244)) for n in names]
    out += [Name(f"{subdomain(n)}/x", False) for n in (245, 253, 254)]
    out += [Name(f"{p}/x", False) for p in BAD_PREFIXES]
    out += [Name(f"example.com/{n}", False) for n in (*BAD_NAME_PARTS, qualified(64))]
    out += [
        Name("kubernetes.io.example.com/x", True),  # no "kubernetes.io/" in it
        Name("example.com/kubernetes.io", True),
        Name("requests/x", True),  # the quota prefix is "requests."
        Name("requestsx.io/x", True),
        Name("requests.example.com/x", False),
        Name("requests.io/x", False),
    ]
    out += [
        Name(n, True, NATIVE_RESOURCE)
        for n in (
            "kubernetes.io/x",
            "foo.kubernetes.io/x",
            "xkubernetes.io/x",  # IsNativeResource looks for "kubernetes.io/" anywhere
            "cpu",
            "memory",
            "ephemeral-storage",
        )
    ]
    out += [Name(n, False) for n in ("pods", "foo", "nvidia.com", "", "/", "/x", "x/", "a/b/c")]
    out += [Name("example.com/x\n", False)]
    return out


DNS_LABELS = ("x", "x9", label(63), "abc", "a--b", "gpu-cluster")
DIGIT_FIRST = ("0-team", "9", "1abc")
NOT_DNS_LABELS = (label(64), "Team", "team_a", "team.a", "-team", "team-", "", "te am", "t\u00ebam")
SUBDOMAINS = ("ceph.rbd", "ceph.rbd-fast", "0.0", "1a", "x" * 100, label(63), subdomain(253))
NOT_SUBDOMAINS = (subdomain(254), "Fast_SSD", ".a", "a.", "a..b", "-a", "a-", "A.b", "", "a b")
# What the program says of a name the Service rule takes but the StatefulSet's revision label
# cannot hold (STATEFULSET_NAME_MAX).
REVISION_LABEL = "controller-revision-hash"
NODE_NAME = "must be a Kubernetes node name"


def priority_class_names() -> list[Name]:
    """Kueue WorkloadPriorityClass names where the stack puts them: the object's name (a custom
    resource's, a DNS-1123 subdomain: apimachinery ValidateObjectMeta) and a run's
    kueue.x-k8s.io/priority-class label value (at most 63: IsValidLabelValue)."""
    values = ("high", "1high", "high.prio", "p-1", label(63), f"{label(31)}.{label(31)}")
    refused = ("High", "high_prio", "a..b", "", "-high", "high-", subdomain(64), "high prio")
    return [Name(n, True) for n in values] + [Name(n, False) for n in refused]


def namespaces() -> list[Name]:
    """DNS-1123 labels, which may start with a digit (IsDNS1123Label, at most 63)."""
    return (
        [Name(n, True) for n in (*DNS_LABELS, *DIGIT_FIRST)]
        + [Name(n, False) for n in NOT_DNS_LABELS]
        + [Name("team\n", False)]
    )


def stack_names() -> list[Name]:
    """DNS-1035 labels, the Service rule (no digit first); the program's `name` also names the
    StatefulSet, whose pods' revision label holds a name of at most 52."""
    return (
        [Name(n, True) for n in (*(n for n in DNS_LABELS if len(n) <= 52), label(52))]
        + [Name(n, True, REVISION_LABEL) for n in (label(53), label(63))]
        + [Name(n, False) for n in (*DIGIT_FIRST, *NOT_DNS_LABELS)]
    )


def subdomains() -> list[Name]:
    """DNS-1123 subdomains: labels joined by dots, at most 253 (a label may be longer than 63)."""
    return [Name(n, True) for n in SUBDOMAINS] + [Name(n, False) for n in NOT_SUBDOMAINS]


def storage_classes() -> list[Name]:
    """A claim's class: a subdomain, or "" for none (the claim binds to a volume without one)."""
    return [Name(n.value, n.kubernetes or n.value == "") for n in subdomains()]


def node_names() -> list[Name]:
    """Node names where the stack puts them: values of a kubernetes.io/hostname node affinity,
    label values (at most 63, letters in both cases, digits, '-', '_', '.'). A node's name is a
    DNS-1123 subdomain, which the program asks of every value."""
    values = ("gpu-1", "node.example.com", "10.0.0.1", label(63), f"{label(31)}.{label(31)}")
    return (
        [Name(n, True) for n in values]
        + [Name(n, True, NODE_NAME) for n in ("GPU_1", "gpu_1", "a..b", "", "Node.example.com")]
        + [Name(n, False) for n in (subdomain(64), subdomain(253), "-gpu", "gpu-", "gpu 1")]
    )


# --- images: distribution/reference regexp.go and normalize.go, as the kubelet parses them --


@dataclass(frozen=True)
class Image:
    """A generated image reference: whether the kubelet can parse it (ParseImageName), and
    whether it is pinned (a digest, or a tag other than latest)."""

    value: str
    pullable: bool
    pinned: bool = True


HEX = "0123456789abcdef" * 8
DIGESTS = ("", "@sha256:" + HEX[:64], "@sha384:" + HEX[:96], "@sha512:" + HEX[:128])
BAD_DIGESTS = (
    "@sha256:" + HEX[:63],
    "@sha256:" + HEX[:64].upper(),  # the kubelet's digests are lower-case hex
    "@md5:" + HEX[:32],  # in the grammar, but no algorithm the kubelet verifies
    "@blake3:" + HEX[:64],
    "@sha256:" + "g" * 64,
    "@sha256",
    "@",
)
REGISTRIES = (
    "",
    "nvcr.io/",
    "localhost/",
    "localhost:5000/",
    "registry.example.com:443/",
    "Registry.Example.COM/",  # a registry's name may have upper-case letters
    "UPPER/",  # ... which alone makes the first component a registry
    "[::1]:5000/",
    "[fe80::1]/",
    "10.0.0.1:5000/",
    "my-registry/",  # no '.', ':' or upper case: a Docker Hub namespace
    "reg_istry.io/",  # no host name, but a path component: the grammar takes it as one
)
BAD_REGISTRIES = ("-registry.io/", "registry.io:port/", "[::1/", "localhost:/")
REPOSITORIES = ("pytorch", "nvidia/pytorch", "a/b/c/d", "a__b", "a--b", "a---b", "a.b_c", "0abc")
BAD_REPOSITORIES = ("Pytorch", "-a", "a-", "a..b", "a___b", "a_-b", "a//b", "")
TAGS = ("", ":1.2.3", ":25.01-py3", ":V1", ":_x", ":" + "a" * 128, ":LATEST", ":latest")
BAD_TAGS = (":" + "a" * 129, ":-x", ":.x", ":", ":a b", ":\u00e9")


def images() -> list[Image]:
    """Registries x repositories, and one repository with every tag and digest form (tag and
    digest together too), each way of leaving the grammar, and the length and case rules."""
    name = "nvcr.io/nvidia/pytorch"
    out = [Image(f"{r}{p}:1", True) for r in REGISTRIES for p in REPOSITORIES]
    out += [
        Image(name + tag + digest, True, bool(digest) or tag not in ("", ":latest"))
        for tag in TAGS
        for digest in DIGESTS
    ]
    out += [Image(f"{r}x:1", False) for r in BAD_REGISTRIES]
    out += [Image(f"nvcr.io/{p}:1", False) for p in BAD_REPOSITORIES]
    out += [Image(name + t, False) for t in BAD_TAGS]
    out += [Image(name + d, False) for d in BAD_DIGESTS]
    out += [
        Image("x" * 247 + ":1", True),  # docker.io/library/<247>: a 255-character path
        Image("x" * 248 + ":1", False),
        Image("r.io/" + "/".join(["x" * 127, "y" * 127]) + ":1", True),
        Image("r.io/" + "/".join(["x" * 128, "y" * 127]) + ":1", False),
        Image("a" * 64, False),  # 64 hex digits: an image ID, not a name
        Image("a" * 64 + ":1", True),
        Image("Ubuntu:1", False),  # docker.io/library/Ubuntu: upper case in the path
        Image("upper/Repo:1", False),
        Image(" x:1", False),
        Image("x:1 ", False),
    ]
    return out


# --- interface names: the kernel's dev_valid_name, the CNI's CNI_IFNAME, the pod's scripts --

# What the program says of a name the kernel takes but the pod's scripts do not read.
POD_SCRIPTS = "the pod's scripts"


def interface_names() -> list[Name]:
    """Names of up to 15 bytes the kernel takes (`kubernetes` here: a host interface can have
    it), those the pod's scripts read too (no `needs_more`), and each way of leaving the
    kernel's rule: empty, 16 bytes, '.', '..', '/', ':', '%', whitespace bytes."""
    scripts_read = ("net1", "eth1", "ens1f0np0", "net1.100", "roce_0", "a-b", "A", "0", "...")
    kernel_only = ("net@1", "net#1", "n\u00e9t1", "net,1", "net*", "net$1", "net'1", "\u00e9" * 7)
    return (
        [Name(n, True) for n in (*scripts_read, "-net1", "x" * 15)]
        + [Name(n, True, POD_SCRIPTS) for n in kernel_only]
        + [
            Name(n, False)
            for n in ("", "x" * 16, "\u00e9" * 8, ".", "..", "net/1", "net:1", "net%d", "net 1")
        ]
        + [Name(n, False) for n in ("net\t1", "net1\n", "\u00e01", "\u00a0net")]
    )


# --- secretEnv names: environment variable names that also key a Secret ---------------------

# What the program says of a name Kubernetes takes for a variable but not as a Secret's key.
SECRET_KEY = "the key of the Secret"


def secret_env_names() -> list[Name]:
    """Environment variable names (printable ASCII but '=', IsRelaxedEnvVarName): `kubernetes`
    is the API server taking the variable; those a Secret key cannot be (IsConfigMapKey:
    letters, digits, '-', '_', '.', at most 253, no '.', '..' or leading '..') need more."""
    keys = ("HF_TOKEN", "hf_token", "hf.token", "hf-token", "1TOKEN", "_", "-x", "a" * 253)
    variables_only = ("a b", "$X", "a:b", "a/b", "a@b", "~", ".", "..", "..a", "a" * 254)
    return (
        [Name(n, True) for n in keys]
        + [Name(n, True, SECRET_KEY) for n in variables_only]
        + [Name(n, False) for n in ("", "a=b", "\u00e9", "a\tb", "TOKEN\n")]
    )


# --- codeSync.period: Go durations (time.ParseDuration), at least 10ms for git-sync -----------

GO_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6}
GO_UNITS.update({"s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9})


def go_durations() -> list[tuple[str, int | None]]:
    """(text, nanoseconds time.ParseDuration reads, None when it fails): every number form with
    every unit, sums of parts, signs, "0", the int64 bounds; and texts outside the grammar."""
    out: list[tuple[str, int | None]] = []
    for number, unit in itertools.product(("0", "10", "1.5", ".5", "5.", "007"), GO_UNITS):
        whole, _, fraction = number.partition(".")
        exact = Fraction(f"{whole or '0'}.{fraction or '0'}") * GO_UNITS[unit]
        out.append((number + unit, int(exact)))
    out += [("1h30m", 5400 * 10**9), ("1m0.5s", 60_500_000_000), ("2h45m30s1ms", 9_930_001 * 10**6)]
    out += [("+1s", 10**9), ("-1s", -(10**9)), ("0", 0), ("-0", 0), ("10ms", 10**7)]
    out += [("9223372036854775807ns", 2**63 - 1), ("2562047h47m16.854775807s", 2**63 - 1)]
    out += [
        (text, None)
        for text in (
            "",
            "1",  # a unit is required but for "0"
            ".s",
            "5 s",
            "5S",
            "5sec",
            "1h-30m",
            "--1s",
            "1.2.3s",
            "9223372036854775808ns",
            "2562047h47m16.854775808s",
            " 5s",
        )
    ]
    return out
