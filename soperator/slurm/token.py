"""JWTs for slurmrestd (auth/jwt): HS256 over the cluster's key, naming the Slurm user in `sun`."""
from __future__ import annotations

import time

import jwt

# Long enough for one reconcile's calls, short enough that a leaked token is soon useless.
LIFETIME_SECONDS = 120
# SlurmUser: the operator reads every node and (later) drains and deletes them.
OPERATOR_USER = "slurm"


def mint_token(key: bytes, user: str = OPERATOR_USER, lifetime: int = LIFETIME_SECONDS,
               now: float | None = None) -> str:
    issued = int(time.time() if now is None else now)
    return jwt.encode({"iat": issued, "exp": issued + lifetime, "sun": user}, key, algorithm="HS256")
