"""Kubernetes' own rules for the values a stack names: quantities, names, label keys, and the
versions that brought the features the program relies on."""

from __future__ import annotations

import re
from fractions import Fraction

# apps.kubernetes.io/pod-index pod label: beta (on by default) in Kubernetes 1.28.
MIN_KUBERNETES_MINOR = 28
# Native sidecars (init containers with restartPolicy Always): on by default from 1.29.
NATIVE_SIDECAR_MINOR = 29
# The StatefulSet controller labels each pod controller-revision-hash=<name>-<hash>, the hash up
# to 10 characters, and a label value holds 63 (kubernetes/kubernetes
# pkg/controller/history/controller_history.go ControllerRevisionName; issue #64023).
STATEFULSET_NAME_MAX = 63 - len("-") - 10
# The pod's primary (cluster network) interface: CNI plugins and Multus name it eth0.
POD_PRIMARY_INTERFACE = "eth0"

# The rules below are whole-string rules: use them with fullmatch. Go's `$` matches only at
# the end of the text, Python's also before a final newline ("team\n" would pass `match`).
# Kubernetes quantity grammar (kubernetes/apimachinery pkg/api/resource/quantity.go):
# <signedNumber><suffix>, number = digits | digits.digits | digits. | .digits, suffix = binary SI
# (Ki..Ei), decimal SI (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
_QUANTITY = re.compile(
    r"(?P<number>[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
)
_SUFFIX_SCALE: dict[str, Fraction] = {
    **{s: Fraction(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Fraction(10) ** e for s, e in (("n", -9), ("u", -6), ("m", -3), ("k", 3), ("M", 6))},
    **{s: Fraction(10) ** e for s, e in (("G", 9), ("T", 12), ("P", 15), ("E", 18))},
}
# DNS-1035 label: Service names and names that become GCP resource names
# (kubernetes/apimachinery pkg/util/validation/validation.go IsDNS1035Label).
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# DNS-1123 label: namespaces (IsDNS1123Label; may start with a digit).
DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Label keys and values (IsQualifiedName, IsValidLabelValue): 63 characters per name part.
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE_MAX = 63
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
IMAGE_REFERENCE = re.compile(
    r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})"
)
EXTENDED_RESOURCE_NAME = re.compile(
    r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


def parse_quantity(value: str) -> Fraction:
    """The exact value of a Kubernetes quantity string; ValueError when it is not one."""
    match = _QUANTITY.fullmatch(value)
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix[:1] in ("e", "E"):
        exponent = int(suffix[1:])
        if abs(exponent) > 64:  # far beyond any resource; keeps the arithmetic bounded
            raise ValueError(f"exponent out of range: {value!r}")
        return number * Fraction(10) ** exponent
    return number * _SUFFIX_SCALE.get(suffix, Fraction(1))
