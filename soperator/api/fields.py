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

# Kubernetes' canonical quantity grammar: a signed decimal and an optional suffix.
_QUANTITY_RE = re.compile(r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}
# Without the '-' of Kubernetes' own: no resource quantity in a SlurmCluster may be negative.
QUANTITY_PATTERN = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"


def quantity_value(text: str) -> Decimal:
    """Numeric value of a Kubernetes quantity string (e.g. '1Gi' -> 1073741824)."""
    m = _QUANTITY_RE.match(text)
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
    if quantity_value(value) < 0:
        raise ValueError(f"{value!r} must not be negative")
    return value


INT_OR_STRING = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}

Quantity = Annotated[
    str,
    BeforeValidator(_to_quantity),
    AfterValidator(_check_quantity),
    WithJsonSchema({**INT_OR_STRING, "pattern": QUANTITY_PATTERN}),
]

# RFC 1123 label: what Kubernetes requires of label values used as names.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]

# Fully qualified: the first component is a registry host (with a '.' or a port, or localhost), so
# no runtime ever guesses a public registry. A digest pins the image (`…@sha256:<64 hex>`).
_REGISTRY = r"(localhost|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+)(:[0-9]{1,5})?"
_PATH = r"(/[a-z0-9]+([._-]+[a-z0-9]+)*)"
REGISTRY_PATTERN = rf"^{_REGISTRY}{_PATH}*$"
IMAGE_PATTERN = rf"^{_REGISTRY}{_PATH}+(:[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(@sha256:[0-9a-f]{{64}})?$"
ImageRef = Annotated[str, Field(min_length=1, max_length=512, pattern=IMAGE_PATTERN)]
Registry = Annotated[str, Field(min_length=1, max_length=256, pattern=REGISTRY_PATTERN)]


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

LabelMap = dict[Annotated[str, Field(max_length=316)], Annotated[str, Field(max_length=63)]]
