"""Status conditions and phase: what changed since the last reconcile, with stable transition times."""
from __future__ import annotations

import datetime
from dataclasses import dataclass


@dataclass(frozen=True)
class Cond:
    type: str
    ok: bool | None  # None: Unknown
    reason: str
    message: str = ""

    @property
    def status(self) -> str:
        return "Unknown" if self.ok is None else ("True" if self.ok else "False")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def merge(old: list[dict], new: list[Cond], generation: int | None) -> list[dict]:
    """New conditions, keeping lastTransitionTime where the status did not change."""
    previous = {c.get("type"): c for c in old or []}
    out = []
    for cond in new:
        before = previous.get(cond.type, {})
        changed = before.get("status") != cond.status
        out.append({"type": cond.type, "status": cond.status, "reason": cond.reason, "message": cond.message,
                    "lastTransitionTime": now() if changed or "lastTransitionTime" not in before
                    else before["lastTransitionTime"],
                    "observedGeneration": generation})
    return out


def transitions(old: list[dict], new: list[Cond]) -> list[Cond]:
    previous = {c.get("type"): (c.get("status"), c.get("reason")) for c in old or []}
    return [c for c in new if previous.get(c.type) != (c.status, c.reason)]
