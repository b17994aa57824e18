"""What a pod's status says of its containers."""
from __future__ import annotations


def last_termination(container_status: dict) -> dict:
    """How the container ended: now (it is terminated) or last time (it has restarted since); {} if never."""
    return ((container_status.get("state") or {}).get("terminated")
            or (container_status.get("lastState") or {}).get("terminated") or {})
