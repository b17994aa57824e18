"""Is a live object already what we would apply? If so, applying is skipped: a no-op reconcile writes nothing."""
from __future__ import annotations

from typing import Any

from soperator.api.fields import quantity_value

# Where a value is a quantity, which the apiserver keeps in its canonical spelling (2048Mi as 2Gi,
# 1000m as 1): a container's or a claim's requests and limits, an emptyDir's sizeLimit.
QUANTITY_PARENTS = ("requests", "limits")
QUANTITY_KEYS = ("sizeLimit",)


def contains(live: Any, desired: Any, _at: tuple[str, ...] = ()) -> bool:
    """True when every field we set has the same value in the live object.

    The apiserver adds defaults and status, so equality would never hold; a subset holds exactly
    when an apply of `desired` would change nothing we own. It also leaves out a field whose value is
    empty (false, "", [], {}: Go's omitempty), which an apply would only write again.
    """
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            contains(live[k], v, (*_at[-1:], k)) if k in live else _empty(v) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(live, list) and len(live) == len(desired)
                and all(contains(lv, dv, _at) for lv, dv in zip(live, desired)))
    return live == desired or (_is_quantity(_at) and _same_quantity(live, desired))


def _empty(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, (str, list, dict)) and not value)


def _is_quantity(at: tuple[str, ...]) -> bool:
    return bool(at) and (at[-1] in QUANTITY_KEYS or (len(at) == 2 and at[0] in QUANTITY_PARENTS))


def _same_quantity(live: Any, desired: Any) -> bool:
    """The same value in another spelling; a string that is no quantity is compared as written."""
    if not isinstance(live, str) or isinstance(desired, bool) or not isinstance(desired, (str, int)):
        return False
    try:
        return quantity_value(live) == quantity_value(str(desired))
    except ValueError:
        return False
