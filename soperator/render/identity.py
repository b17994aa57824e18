"""spec.identity on the node pods: sssd.conf's ConfigMap, and what each Slurm node pod (controller,
workers, login) mounts for SSSD. The bind password never enters an object the operator writes: the
pods mount the admin's Secret and the entrypoint puts it into sssd.conf (soperator/node/identity.py)."""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.node.layout import (BIND_DN_FILE, BIND_PASSWORD_FILE, IDENTITY_CA_FILE, IDENTITY_HASH_ANNOTATION,
                                   NAMES, PATHS, SSSD_CONF_FILE)
from soperator.render.common import Obj, config_map_volume, content_hash, metadata, object_name
from soperator.render.configs import sssd_conf


def identity_config_map_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, NAMES.identity)


def identity_config_map(cluster: SlurmCluster) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(cluster, identity_config_map_name(cluster), NAMES.identity),
            "data": {SSSD_CONF_FILE: sssd_conf(cluster)}}


def identity_volumes(cluster: SlurmCluster) -> list[Obj]:
    """sssd.conf, the bind Secret and the CA (each only when the spec names it), and SSSD's state: an
    emptyDir, so its cache outlives a restarted container (not the pod)."""
    identity = cluster.spec.identity
    if identity is None:
        return []
    ldap = identity.ldap
    volumes = [config_map_volume("identity-conf", identity_config_map_name(cluster)),
               {"name": "sss-state", "emptyDir": {}}]
    if ldap.bind_secret:
        volumes.append({"name": "identity-bind", "secret": {
            "secretName": ldap.bind_secret, "defaultMode": 0o400,
            "items": [{"key": k, "path": k} for k in (BIND_DN_FILE, BIND_PASSWORD_FILE)]}})
    if ldap.ca_secret:
        volumes.append({"name": "identity-ca", "secret": {
            "secretName": ldap.ca_secret, "defaultMode": 0o444,
            "items": [{"key": IDENTITY_CA_FILE, "path": IDENTITY_CA_FILE}]}})
    return volumes


def identity_mounts(cluster: SlurmCluster) -> list[Obj]:
    identity = cluster.spec.identity
    if identity is None:
        return []
    mounts = [{"name": "identity-conf", "mountPath": PATHS.identity_conf_given.rsplit("/", 1)[0], "readOnly": True},
              {"name": "sss-state", "mountPath": PATHS.sss_state}]
    if identity.ldap.bind_secret:
        mounts.append({"name": "identity-bind", "mountPath": PATHS.identity_bind_dir, "readOnly": True})
    if identity.ldap.ca_secret:
        mounts.append({"name": "identity-ca", "mountPath": PATHS.identity_ca.rsplit("/", 1)[0], "readOnly": True})
    return mounts


def identity_annotations(cluster: SlurmCluster) -> dict[str, str]:
    """SSSD reads sssd.conf once: a change to it rolls the pods (workers drain first)."""
    if cluster.spec.identity is None:
        return {}
    return {IDENTITY_HASH_ANNOTATION: content_hash([sssd_conf(cluster)])}
