"""Names, labels, ownership and pod-template pieces shared by every component's builders."""
from __future__ import annotations

import hashlib
from typing import Any, Iterable

from soperator import __version__
from soperator.api import releases
from soperator.api.cluster import API_VERSION, KIND, SlurmCluster
from soperator.api.common import ComponentBase
from soperator.node.layout import (APP_NAME, COMPONENT_LABEL, INSTANCE_LABEL, MANAGED_BY_LABEL, NAME_LABEL, OPERATOR,
                                   PART_OF_LABEL, SLURM_RELEASE_LABEL, VERSION_LABEL)

Obj = dict[str, Any]


def object_name(cluster: SlurmCluster, suffix: str) -> str:
    return f"{cluster.name}-{suffix}"


def selector_labels(cluster: SlurmCluster, component: str) -> dict[str, str]:
    return {
        COMPONENT_LABEL: component,
        INSTANCE_LABEL: cluster.name,
        NAME_LABEL: APP_NAME,
    }


def labels(cluster: SlurmCluster, component: str) -> dict[str, str]:
    return {
        **selector_labels(cluster, component),
        MANAGED_BY_LABEL: OPERATOR,
        PART_OF_LABEL: OPERATOR,
        VERSION_LABEL: __version__,
        SLURM_RELEASE_LABEL: cluster.spec.slurm_version,
    }


def owner_references(cluster: SlurmCluster) -> list[Obj]:
    """Children are garbage-collected with their SlurmCluster; uid is known only once it exists."""
    if not cluster.metadata.uid:
        return []
    return [{"apiVersion": API_VERSION, "kind": KIND, "name": cluster.name,
             "uid": cluster.metadata.uid, "controller": True, "blockOwnerDeletion": True}]


def metadata(cluster: SlurmCluster, name: str, component: str,
             annotations: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": cluster.namespace, "labels": labels(cluster, component)}
    refs = owner_references(cluster)
    if refs:
        meta["ownerReferences"] = refs
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta


def content_hash(parts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def service_domain(cluster: SlurmCluster, service: str) -> str:
    return f"{service}.{cluster.namespace}.svc.{cluster.spec.cluster_domain}"


def scheduling(component: ComponentBase) -> Obj:
    out: Obj = {}
    sched = component.scheduling
    if sched.node_selector:
        out["nodeSelector"] = dict(sorted(sched.node_selector.items()))
    if sched.tolerations:
        out["tolerations"] = [t.wire() for t in sched.tolerations]
    if sched.affinity:
        out["affinity"] = sched.affinity
    return out


def resources(component: ComponentBase, extra_limits: dict[str, str] | None = None) -> Obj:
    res = component.resources
    limits = {**res.limits, **(extra_limits or {})}
    out: Obj = {}
    if res.requests:
        out["requests"] = dict(sorted(res.requests.items()))
    if limits:
        out["limits"] = dict(sorted(limits.items()))
    return out


def config_map_volume(name: str, config_map: str, mode: int = 0o644) -> Obj:
    return {"name": name, "configMap": {"name": config_map, "defaultMode": mode}}


def secret_volume(name: str, secret: str, mode: int) -> Obj:
    return {"name": name, "secret": {"secretName": secret, "defaultMode": mode}}


def slurm_daemon_probes(port: int, release: str) -> Obj:
    """slurmctld's and slurmd's own probes (Slurm 25.11+), served over HTTP on their RPC port with no
    token: ready while the daemon services RPCs, live while it runs. Liveness never asks more than
    that: a busy slurmd restarted by its probe would end its node's jobs. Older releases have none: a
    TCP connect to the port."""
    if not releases.at_least(release, releases.OPENMETRICS):
        return {"readinessProbe": tcp_probe(port, period=5, failures=3),
                "livenessProbe": tcp_probe(port, period=15, failures=8)}

    def probe(path: str, period: int, failures: int) -> Obj:
        return {"httpGet": {"path": path, "port": port}, "periodSeconds": period, "failureThreshold": failures,
                "timeoutSeconds": 5}
    return {"readinessProbe": probe("/readyz", 5, 3), "livenessProbe": probe("/livez", 15, 8)}


def tcp_probe(port: int, period: int, failures: int) -> Obj:
    return {"tcpSocket": {"port": port}, "periodSeconds": period, "failureThreshold": failures,
            "timeoutSeconds": 5}
