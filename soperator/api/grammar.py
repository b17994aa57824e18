"""What a value may hold before a config-file template sees it.

slurm.conf, gres.conf, cgroup.conf and plugstack.conf share Slurm's line grammar (s_p_parse_line):
'#' starts a comment, a '\\' at the end of a line joins the next one, whitespace separates
`Key=Value` pairs and a quote starts a quoted value. A value that reaches one of these files is
therefore one token of printable ASCII with none of those characters in it; a key is letters and
digits. Everything else here narrows a token to the grammar of the one key it fills.

Every pattern is written for both Python's `re` and Go's RE2 (the apiserver), so the CRD carries it.
"""
from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from soperator.api.common import cel

# Printable ASCII (0x21-0x7e) except '"' (0x22), '#' (0x23), "'" (0x27) and '\' (0x5c).
_TOKEN_CHARS = r"!$-&(-\[\]-~"
TOKEN_PATTERN = rf"^[{_TOKEN_CHARS}]+$"
# A list item joined with ',' into one value: a token without ','.
ITEM_PATTERN = r"^[!$-&(-+\--\[\]-~]+$"

SlurmToken = Annotated[str, Field(min_length=1, max_length=1024, pattern=TOKEN_PATTERN)]
SlurmListItem = Annotated[str, Field(min_length=1, max_length=256, pattern=ITEM_PATTERN)]
SlurmKey = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z][A-Za-z0-9]*$")]

# Partition and feature names: no ',' (lists), ':' (gres), '=' or brackets (hostlists).
SLURM_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
SlurmName = Annotated[str, Field(min_length=1, max_length=64, pattern=SLURM_NAME_PATTERN)]

# Slurm time: INFINITE/UNLIMITED, minutes, m:s, h:m:s, d-h, d-h:m, d-h:m:s. Slurm adds it up in a C
# int of seconds: the leading number is bounded so no form reaches 2^31 (9,999 days, 99,999 hours).
TIME_PATTERN = (r"^(INFINITE|UNLIMITED|infinite|unlimited|[0-9]{1,7}|[0-9]{1,7}:[0-9]{1,2}|[0-9]{1,5}(:[0-9]{1,2}){2}"
                r"|[0-9]{1,4}-[0-9]{1,2}(:[0-9]{1,2}){0,2})$")
SlurmTime = Annotated[str, Field(min_length=1, max_length=32, pattern=TIME_PATTERN)]

# A hostlist expression: comma-separated names, each with optional [a-b,c] ranges.
_RANGE = r"[0-9]+(-[0-9]+)?"
_HOST = rf"([A-Za-z0-9_.-]|\[{_RANGE}(,{_RANGE})*\])+"
HOSTLIST_PATTERN = rf"^(ALL|{_HOST}(,{_HOST})*)$"
_BRACKET = re.compile(r"\[([^\]]*)\]")


def _ranges_ascend(value: str) -> str:
    for body in _BRACKET.findall(value):
        for part in body.split(","):
            low, _, high = part.partition("-")
            if high and int(low) > int(high):
                raise ValueError(f"hostlist range [{part}] runs backwards")
    return value


Hostlist = Annotated[str, Field(min_length=1, max_length=1024, pattern=HOSTLIST_PATTERN),
                     AfterValidator(_ranges_ascend)]

# One Gres= entry: name[:type]:count, the count a positive integer.
GRES_PATTERN = r"^[a-z][a-z0-9_]{0,31}(:[A-Za-z0-9_.-]{1,63})?:[1-9][0-9]{0,8}$"
GresEntry = Annotated[str, Field(min_length=3, max_length=128, pattern=GRES_PATTERN)]
# A gres without its count (name[:type]), and the device files gres.conf's File= gives it: a path under
# /dev (no component starts with a dot: no '..'), one bracketed number range at its end
# (/dev/infiniband/uverbs[0-3]); Slurm reads a comma outside brackets as a second path, so none.
GRES_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}(:[A-Za-z0-9_.-]{1,63})?$"
GresDeviceFiles = Annotated[str, Field(min_length=6, max_length=256, pattern=(
    r"^/dev(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*/[A-Za-z0-9_-][A-Za-z0-9_.-]*(\[[0-9][0-9,-]*\])?$"))]

# A plugstack.conf line: required|optional, an absolute plugin path, then argument tokens.
PLUGSTACK_PATTERN = rf"^(required|optional) /[{_TOKEN_CHARS}]*( [{_TOKEN_CHARS}]+)*$"
PlugStackLine = Annotated[str, Field(min_length=1, max_length=1024, pattern=PLUGSTACK_PATTERN)]


# Keys whose value is a secret (AccountingStoragePass, JobCompPass, …) never go into a ConfigMap.
SECRET_KEY_PATTERN = "pass|secret|token|credential|privatekey"
# A URL's user information with a password (JobCompLoc=mysql://slurm:hunter2@db/…).
URL_CREDENTIALS_PATTERN = r"://[^/@]*:[^/@]*@"


def extra_keys(managed: frozenset[str], what: str):
    """A map of more `Key=Value` pairs for one file, refusing the keys in `managed` in any letter case
    (as Slurm's parser compares them), in the models and, as CEL, in the CRD."""
    def own_keys(extra: dict) -> dict:
        for key in extra:
            if key.lower() in managed:
                raise ValueError(f"{key} is managed by soperator (or would break the jail) and cannot be set here")
            if re.search(SECRET_KEY_PATTERN, key.lower()):
                raise ValueError(f"{key} looks like a secret: config files are world-readable ConfigMaps")
            if re.search(URL_CREDENTIALS_PATTERN, extra[key]):
                raise ValueError(f"{key}: a URL with a password (user:password@) is a secret in a world-readable "
                                 "ConfigMap; give the password where the plugin reads it from a file")
        return extra

    names = ", ".join(f"'{k}'" for k in sorted(managed))
    rule = cel((f"self.all(k, !(k.lowerAscii() in [{names}]))",
                f"{what} may not set a key soperator manages or one that would break the jail"),
               (f"self.all(k, !k.lowerAscii().matches('{SECRET_KEY_PATTERN}'))",
                f"{what} may not hold a secret (a password, token or key): it is a world-readable ConfigMap"))
    return Annotated[dict[SlurmKey, SlurmToken], Field(
        max_length=128, json_schema_extra=rule,
        description=f"more {what} keys, verbatim; keys soperator manages are refused"), AfterValidator(own_keys)]
