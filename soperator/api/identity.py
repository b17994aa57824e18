"""spec.identity: users and groups from an LDAP directory, the same on every node and in the jail.

SSSD runs beside the Slurm daemons of the controller, the workers and the login nodes, and the jail
reaches it through its sockets, so `id`, ssh logins, job steps and Slurm see the directory's users;
ssh keys come from the directory (sshPublicKey), and a user's home is made at the first login. SSSD
keeps the users it has seen: a directory outage does not lock them out (docs/identity.md).
"""
from __future__ import annotations

import ipaddress
import re
from typing import Literal, Optional

from pydantic import ConfigDict, Field, field_validator, model_validator
from typing_extensions import Annotated

from soperator.api.common import ApiModel, AtField, cel
from soperator.api.fields import PORT_PATTERN, Cidr, SecretName

# A host name or an IPv4 address, then an optional port: sssd's ldap_uri is a comma list, so no
# comma, space or anything a URI could smuggle another option through.
_HOST = r"([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
LDAP_URI_PATTERN = rf"^ldaps?://{_HOST}{PORT_PATTERN}?/?$"
LdapUri = Annotated[str, Field(min_length=8, max_length=260, pattern=LDAP_URI_PATTERN,
                               description="ldaps://host[:port], or ldap://host[:port] with startTls")]
# RFC 4514 as sssd.conf can carry it: attribute=value pairs, no control characters (a line break would
# start another option), no '?' (sssd's search-base separator) and no '#' (a comment in sssd.conf).
DN_PATTERN = r"^[A-Za-z][A-Za-z0-9-]*=[^,=?#\x00-\x1f\x7f]+(,[A-Za-z][A-Za-z0-9-]*=[^,=?#\x00-\x1f\x7f]+)*$"
Dn = Annotated[str, Field(min_length=3, max_length=1024, pattern=DN_PATTERN)]
# An RFC 4515 filter: parenthesised, printable ASCII, without '?' and '#' (see DN_PATTERN). That its
# parentheses balance is checked by the operator only (filter_problem): the CRD cannot count them.
FILTER_PATTERN = r"^\([ -\"$->@-~]*\)$"
LdapFilter = Annotated[str, Field(min_length=3, max_length=1024, pattern=FILTER_PATTERN)]


# RFC 4515's item: an attribute description, an operator, a value without unescaped parentheses.
_ITEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9;.:-]*(=|~=|>=|<=)[^()]*")
MAX_FILTER_DEPTH = 32


def filter_problem(text: str) -> str | None:
    """None for an RFC 4515 filter ('(' then '&' or '|' and filters, '!' and one filter, or
    attribute, operator and value, then ')'); else what is wrong. Read without recursion."""
    example = "one parenthesised filter, e.g. (&(objectClass=posixAccount)(memberOf=...))"
    if text.count("(") != text.count(")"):
        return f"{text!r}: unbalanced parentheses"
    pos, depth, stack = 0, 0, []  # stack: per open '(', its operator ('&', '|', '!') and filters seen
    while True:
        if pos >= len(text) or text[pos] != "(":
            return f"{text!r}: a filter starts with '(' at {pos + 1}: {example}"
        pos += 1
        if pos < len(text) and text[pos] in "&|!":
            stack.append([text[pos], 0])
            pos += 1
            if len(stack) > MAX_FILTER_DEPTH:
                return f"{text!r}: nested more than {MAX_FILTER_DEPTH} levels"
            continue
        match = _ITEM.match(text, pos)
        if not match or match.end() >= len(text) or text[match.end()] != ")":
            return f"{text!r}: at {pos + 1}, not attribute, operator (=, ~=, >=, <=) and value: {example}"
        pos = match.end() + 1
        while stack:  # the item (or a finished filter) counts for its parent, which may be done
            stack[-1][1] += 1
            if pos < len(text) and text[pos] == "(" and not (stack[-1][0] == "!" and stack[-1][1] == 1):
                break
            op, count = stack.pop()
            if pos >= len(text) or text[pos] != ")":
                return f"{text!r}: at {pos + 1}, '{op}' takes " + ("one filter" if op == "!" else "filters") + \
                    ", then ')'"
            pos += 1
        else:
            return None if pos == len(text) else f"{text!r}: more after the filter ends at {pos}: {example}"
        # the next filter of the open '&', '|'


def literal_address(uri: str) -> ipaddress.IPv4Address | None:
    """The URI's host, when it is an IPv4 address written out."""
    host = uri.split("://", 1)[1].rstrip("/").rsplit(":", 1)[0] if ":" in uri.split("://", 1)[1] else \
        uri.split("://", 1)[1].rstrip("/")
    try:
        return ipaddress.IPv4Address(host)
    except ValueError:
        return None


class LdapDirectory(ApiModel):
    """Where the users are, and how SSSD reaches them: always over TLS, with the server's certificate
    checked (against caSecret, or the image's public CAs)."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("self.uris.all(u, u.startsWith('ldaps://')) || (has(self.startTls) && self.startTls)",
         "uris: ldap:// needs startTls (the directory is always reached over TLS)")))

    uris: list[LdapUri] = Field(min_length=1, max_length=8, description="the directory's servers, tried in order",
                                json_schema_extra=cel(("self.all(a, self.exists_one(b, b == a))",
                                                       "a URI is listed twice")))
    search_base: Dn = Field(description="where users and groups are looked for, e.g. dc=example,dc=org")
    start_tls: bool = Field(default=False, description="StartTLS on ldap:// URIs")
    ca_secret: Optional[SecretName] = Field(
        default=None, description="a Secret whose key 'ca.crt' holds the CA certificates (PEM) the servers' "
        "certificates are checked against; default: the node image's public CAs")
    bind_secret: Optional[SecretName] = Field(
        default=None, description="a Secret with keys 'username' (the bind DN) and 'password' SSSD binds with; "
        "default: an anonymous bind")
    user_filter: Optional[LdapFilter] = Field(
        default=None, description="only users matching it exist on the cluster, e.g. (memberOf=cn=hpc,ou=groups,"
        "dc=example,dc=org)")
    group_filter: Optional[LdapFilter] = Field(default=None, description="only groups matching it are seen")
    egress_cidrs: list[Cidr] = Field(
        default_factory=list, max_length=16, description="the servers' addresses, which the nodes' egress policy "
        "then lets SSSD reach on the URIs' ports (the policy blocks private ranges by default; job steps share "
        "the pod's network, so they can reach these ports too)")
    schema_: Literal["rfc2307", "rfc2307bis"] = Field(
        default="rfc2307", alias="schema", description="rfc2307: groups list members' names (memberUid); "
        "rfc2307bis: their DNs (member)")

    @field_validator("uris")
    @classmethod
    def _distinct(cls, uris: list[str]) -> list[str]:
        if len(set(uris)) != len(uris):
            raise ValueError("a URI is listed twice")
        return uris

    @field_validator("user_filter", "group_filter")
    @classmethod
    def _balanced(cls, text: str | None) -> str | None:
        problem = filter_problem(text) if text else None
        if problem:
            raise ValueError(problem)
        return text

    def ports(self) -> list[int]:
        """The URIs' ports, in order: LDAP's 389 and LDAPS' 636 unless given."""
        found = []
        for uri in self.uris:
            host_port = uri.split("://", 1)[1].rstrip("/")
            port = int(host_port.rsplit(":", 1)[1]) if ":" in host_port else (636 if uri.startswith("ldaps") else 389)
            if port not in found:
                found.append(port)
        return found

    @model_validator(mode="after")
    def _tls(self) -> "LdapDirectory":
        plain = [u for u in self.uris if u.startswith("ldap://")]
        if plain and not self.start_tls:
            raise AtField(("uris",), f"{plain[0]}: ldap:// needs startTls (the directory is always reached over TLS)")
        return self


class IdentitySpec(ApiModel):
    ldap: LdapDirectory
    cache_seconds: Annotated[int, Field(ge=10, le=86400)] = Field(
        default=300, description="how long a user or group looked up is taken as current before SSSD asks the "
        "directory again (a removed user loses access within it); while the directory is down, what was seen "
        "stays valid")
