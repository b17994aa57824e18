"""A changed Slurm configuration in force within seconds, not a minute.

slurmctld reads the ConfigMap's files as the kubelet projects them into the controller pod, and the
controller's watch (soperator/node/reconfigure.py) runs `scontrol reconfigure` a few seconds after
they change. The kubelet refreshes a pod's ConfigMap volumes whenever it syncs the pod, which on its
own happens only every minute or so (its syncFrequency, plus jitter). An update of the pod's
metadata is synced at once, and each sync remounts the volumes that ask for it (ConfigMaps do). So
when the files change, the operator writes their digest on the controller pod as an annotation: no
API access for the pod, one patch per change, none on a quiet pass. Only a running pod is told: one
that has not started reads the files as they are when it does.
"""
from __future__ import annotations

import hashlib
import json

from soperator.kube import Kube
from soperator.node.layout import CONFIG_SEEN_ANNOTATION, CONTROLLER
from soperator.reconcile.observe import Snapshot


def configs_digest(config_map: dict) -> str:
    return hashlib.sha256(json.dumps(config_map.get("data") or {}, sort_keys=True).encode()).hexdigest()[:16]


def nudge_controller(kube: Kube, snap: Snapshot, config_map: dict) -> int:
    """Annotate every running controller pod that has not seen these files; how many were annotated."""
    digest, nudged = configs_digest(config_map), 0
    for pod in snap.pods_of(CONTROLLER):
        meta = pod["metadata"]
        running = (pod.get("status") or {}).get("phase") == "Running" and not meta.get("deletionTimestamp")
        if running and (meta.get("annotations") or {}).get(CONFIG_SEEN_ANNOTATION) != digest:
            nudged += kube.annotate_pod(meta["namespace"], meta["name"], {CONFIG_SEEN_ANNOTATION: digest})
    return nudged
