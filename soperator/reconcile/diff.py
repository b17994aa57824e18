"""Is a live object already what we would apply? If so, applying is skipped: a no-op reconcile writes nothing."""
from __future__ import annotations

from typing import Any


def contains(live: Any, desired: Any) -> bool:
    """True when every field we set has the same value in the live object.

    The apiserver adds defaults and status, so equality would never hold; a subset holds exactly
    when an apply of `desired` would change nothing we own.
    """
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and contains(live[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(live, list) and len(live) == len(desired)
                and all(contains(lv, dv) for lv, dv in zip(live, desired)))
    return live == desired
