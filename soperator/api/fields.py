"""Reusable constrained field types shared by the SlurmCluster models.

Each type carries the JSON-schema hints the CRD generator needs, so the apiserver
enforces the same rule pydantic does.
"""
from __future__ import annotations

import ipaddress
import re
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

def cel(*rules: tuple[str, str] | dict) -> dict[str, Any]:
    """CEL rules for the CRD (`x-kubernetes-validations`): the apiserver's copy of a model rule."""
    return {"x-kubernetes-validations": [r if isinstance(r, dict) else {"rule": r[0], "message": r[1]}
                                         for r in rules]}


# Kubernetes' quantity grammar: a decimal and an optional suffix. No sign but '+': no quantity in a
# SlurmCluster may be negative, and '-0' is refused as the CRD refuses it. An exponent has at most two
# digits: 1e9999999 is a quantity to Kubernetes, and a size nobody means.
_QUANTITY_RE = re.compile(r"(?P<num>\+?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}
QUANTITY_PATTERN = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$"
# The same with a digit other than 0 in the number: more than zero (a tiny one rounds up to 1n).
POSITIVE_QUANTITY_PATTERN = (r"^\+?(([0-9]*[1-9][0-9]*(\.[0-9]*)?)|([0-9]*\.[0-9]*[1-9][0-9]*))"
                             r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$")
# What the kubelet and the scheduler count in: an int64 of the base unit.
MAX_QUANTITY = 2**63 - 1
# The largest integer the apiserver's schema keeps exactly (it reads `maximum` as a float64).
MAX_SAFE_INTEGER = 2**53 - 1


def quantity_value(text: str) -> Decimal:
    """Numeric value of a Kubernetes quantity string (e.g. '1Gi' -> 1073741824)."""
    m = _QUANTITY_RE.fullmatch(text)
    if not m:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (examples: 500m, 2, 64Mi, 1Gi)")
    try:
        num = Decimal(m["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"{text!r} is not a number") from exc
    suffix = m["suffix"] or ""
    if suffix in _BINARY:
        return num * _BINARY[suffix]
    if suffix in _DECIMAL:
        return num * _DECIMAL[suffix]
    return num * (Decimal(10) ** int(suffix[1:]))


def _to_quantity(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a quantity must be a string or a number, not a boolean")
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _check_quantity(value: str) -> str:
    if len(value) > 64:
        raise ValueError(f"{value[:20]!r}… is longer than a quantity (64 characters)")
    if quantity_value(value) > MAX_QUANTITY:
        raise ValueError(f"{value!r} is more than Kubernetes counts (2^63-1 of the unit)")
    return value


def _check_positive(value: str) -> str:
    if quantity_value(value) <= 0:
        raise ValueError(f"{value!r}: a size must be more than zero")
    return value


INT_OR_STRING = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}

Quantity = Annotated[
    str,
    BeforeValidator(_to_quantity),
    AfterValidator(_check_quantity),
    WithJsonSchema({**INT_OR_STRING, "pattern": QUANTITY_PATTERN, "maxLength": 64}),
]
# A volume's or a memory medium's size: Kubernetes refuses a claim of 0, and an empty /dev/shm or
# scratch volume is a broken node.
PositiveQuantity = Annotated[
    str,
    BeforeValidator(_to_quantity),
    AfterValidator(_check_quantity),
    AfterValidator(_check_positive),
    WithJsonSchema({**INT_OR_STRING, "pattern": POSITIVE_QUANTITY_PATTERN, "maxLength": 64, "x-kubernetes-validations": [
        {"rule": "type(self) != int || self > 0", "message": "a size must be more than zero"}]}),
]

# RFC 1123 label: what Kubernetes requires of label values used as names.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
# RFC 1123 subdomain: what Kubernetes requires of most object names, Secrets' among them.
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SecretName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]

# Fully qualified: the first component is a registry host (with a '.' or a port, or localhost), so
# no runtime ever guesses a public registry. A digest pins the image (`…@sha256:<64 hex>`). The
# grammar is the distribution reference's: a path component's separators are '.', '_', '__' or
# dashes, a port is a port, and the name (registry and path) is at most 255 characters.
_PORT = r"(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))"
PORT_PATTERN = _PORT  # ':' and a port, 1..65535
_REGISTRY = rf"(localhost|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+){_PORT}?"
_PATH = r"(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)"
REGISTRY_PATTERN = rf"^{_REGISTRY}{_PATH}*$"
IMAGE_PATTERN = rf"^{_REGISTRY}{_PATH}+(:[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(@sha256:[0-9a-f]{{64}})?$"
MAX_IMAGE_NAME = 255


def image_name(ref: str) -> str:
    """The repository part of a reference: without its digest and tag."""
    name = ref.split("@", 1)[0]
    colon = name.rfind(":")
    return name[:colon] if colon > name.rfind("/") else name


def _check_image_name(ref: str) -> str:
    if len(image_name(ref)) > MAX_IMAGE_NAME:
        raise ValueError(f"the image's name (registry and repository, {len(image_name(ref))} characters) is "
                         f"longer than a registry takes ({MAX_IMAGE_NAME})")
    return ref


_IMAGE_NAME_RULE = ("(self.split('@')[0].lastIndexOf(':') > self.split('@')[0].lastIndexOf('/') ? "
                    "self.split('@')[0].lastIndexOf(':') : size(self.split('@')[0])) <= 255")
ImageRef = Annotated[str, Field(min_length=1, max_length=512, pattern=IMAGE_PATTERN, json_schema_extra=cel(
    (_IMAGE_NAME_RULE, "the image's name (registry and repository) is longer than 255 characters"))),
    AfterValidator(_check_image_name)]
# Room for the longest component after it: `<registry>/populate-jail`.
Registry = Annotated[str, Field(min_length=1, max_length=240, pattern=REGISTRY_PATTERN)]


def _check_cidr(value: str) -> str:
    if "/" not in value:
        raise ValueError(f"{value!r} is not a CIDR range: it needs a prefix length (example: 203.0.113.0/24)")
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR range (example: 203.0.113.0/24)") from exc
    return value


Cidr = Annotated[str, Field(max_length=64, json_schema_extra={"x-kubernetes-validations": [
    {"rule": "isCIDR(self)", "message": "not a CIDR range (example: 203.0.113.0/24)"}]}), AfterValidator(_check_cidr)]

_SSH_KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                  "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
_MIN_RSA_BITS = 2048


def _check_ssh_key(value: str) -> str:
    """One authorized_keys line, 'type base64 [comment]', whose key really parses as that type:
    sshd ignores a line it cannot parse, and the user is locked out with no error."""
    value = value.strip()
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError("an SSH public key is one line, without control characters")
    kind, _, rest = value.partition(" ")
    blob = rest.split(" ", 1)[0]
    try:
        key = serialization.load_ssh_public_key(f"{kind} {blob}".encode())
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ValueError(f"the {kind} key does not parse ({exc}): copy the whole line of the .pub file") from None
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < _MIN_RSA_BITS:
        raise ValueError(f"RSA key of {key.key_size} bits: at least {_MIN_RSA_BITS} are required")
    return value


# The pattern is the apiserver's share of the check (one line, 'type base64 [comment]').
SSH_KEY_PATTERN = (rf"^({'|'.join(re.escape(t) for t in _SSH_KEY_TYPES)}) [A-Za-z0-9+/]+={{0,2}}"
                   r"( [^\x00-\x1f\x7f]*)?$")
SshPublicKey = Annotated[str, Field(max_length=16384, pattern=SSH_KEY_PATTERN), AfterValidator(_check_ssh_key)]

# Kubernetes' label and annotation keys: a name of 63 characters at most, alphanumeric at both ends,
# with an optional DNS subdomain prefix and '/'; a label's value: empty or such a name.
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_PATTERN = rf"^({DNS_SUBDOMAIN_PATTERN[1:-1]}/)?{_NAME}$"
LABEL_VALUE_PATTERN = rf"^({_NAME})?$"
# All of an object's annotations together, keys and values (the apiserver's TotalAnnotationSizeLimitB).
MAX_ANNOTATIONS_BYTES = 256 * 1024


def qualified_name_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if not re.fullmatch(QUALIFIED_NAME_PATTERN[1:-1], key):
        return f"{key!r} is not a qualified name (e.g. example.com/my-key: letters, digits, '-', '_', '.')"
    if len(name) > 63 or len(prefix) > 253:
        return f"{key!r} is too long (63 characters for the name, 253 for the prefix)"
    return None


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        problem = qualified_name_problem(key)
        if problem:
            raise ValueError(f"label key {problem}")
        if len(value) > 63 or not re.fullmatch(LABEL_VALUE_PATTERN[1:-1], value):
            raise ValueError(f"label {key}: the value {value[:80]!r} is not a label value (at most 63 letters, "
                             "digits, '-', '_' or '.', alphanumeric at both ends)")
    return labels


def _check_annotations(annotations: dict[str, str]) -> dict[str, str]:
    for key in annotations:
        problem = qualified_name_problem(key)
        if problem:
            raise ValueError(f"annotation key {problem}")
    total = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if total > MAX_ANNOTATIONS_BYTES:
        raise ValueError(f"annotations take {total:,} bytes; Kubernetes allows {MAX_ANNOTATIONS_BYTES:,} in all")
    return annotations


_KEY_RULE = f"self.all(k, k.matches(r'{QUALIFIED_NAME_PATTERN}'))"
LabelMap = Annotated[dict[Annotated[str, Field(max_length=317)], Annotated[str, Field(max_length=63)]], Field(
    max_length=64, json_schema_extra=cel(
        (_KEY_RULE, "a label key is a qualified name (e.g. example.com/my-key)"),
        (f"self.all(k, self[k].matches(r'{LABEL_VALUE_PATTERN}'))",
         "a label value is empty or letters, digits, '-', '_' or '.', alphanumeric at both ends"))),
    AfterValidator(_check_labels)]
AnnotationMap = Annotated[dict[Annotated[str, Field(max_length=317)], Annotated[str, Field(
    max_length=MAX_ANNOTATIONS_BYTES)]], Field(max_length=64, json_schema_extra=cel(
        (_KEY_RULE, "an annotation key is a qualified name (e.g. example.com/my-key)"))),
    AfterValidator(_check_annotations)]
