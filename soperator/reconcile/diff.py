"""Is a live object already what we would apply? If so, applying is skipped: a no-op reconcile writes nothing."""
from __future__ import annotations

from typing import Any

from soperator.api.fields import quantity_value


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
    return live == desired or _same_quantity(live, desired)


def _same_quantity(live: Any, desired: Any) -> bool:
    """The apiserver keeps a quantity in its canonical spelling (2048Mi as 2Gi, 1000m as 1): the same
    value is the same field, or a spec written so would be applied again on every pass. A string that
    is no quantity is compared as written."""
    if not isinstance(live, str) or isinstance(desired, bool) or not isinstance(desired, (str, int)):
        return False
    try:
        return quantity_value(live) == quantity_value(str(desired))
    except ValueError:
        return False
