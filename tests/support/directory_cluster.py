"""The e2e's cluster of real containers with spec.identity: a throwaway slapd (tests/support/directory.py)
on the host side of the cluster's podman network, its name served by the network's DNS, and the bind
and CA Secrets the rendered pods mount. Shared by tests/e2e/test_identity_e2e.py and bench/identity.py."""
from __future__ import annotations

import base64
from pathlib import Path

from soperator.render.accounting import storage
from soperator.render.configs import slurmdbd_address
from tests.cluster.controlplane import free_port
from tests.support.directory import READER_DN, READER_PASSWORD, SUFFIX, started
from tests.support.e2e_cluster import running

HOST = "directory.e2e.test"
BIND_SECRET, CA_SECRET = "e2e-ldap-bind", "e2e-ldap-ca"


def _secret(name: str, files: dict[str, bytes]) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {k: base64.b64encode(v).decode() for k, v in files.items()}}


def with_directory(tmp_path: Path, cache_seconds: int, **spec):
    """A generator, for a fixture's body or contextlib: yields (cluster, directory), both stopped after."""
    port = free_port()
    identity = {"ldap": {"uris": [f"ldaps://{HOST}:{port}"], "searchBase": SUFFIX, "bindSecret": BIND_SECRET,
                         "caSecret": CA_SECRET}, "cacheSeconds": cache_seconds}
    clusters = running(tmp_path, identity=identity, **spec)
    cluster = next(clusters)
    directory = None
    try:
        gateway = cluster.dns.gateway()
        directory = started(tmp_path / "directory", gateway, port, HOST)
        cluster.dns.add(HOST, gateway)
        cluster.objects[("Secret", BIND_SECRET)] = _secret(BIND_SECRET, {"username": READER_DN.encode(),
                                                                         "password": READER_PASSWORD.encode()})
        cluster.objects[("Secret", CA_SECRET)] = _secret(CA_SECRET, {"ca.crt": directory.ca_pem})
        yield cluster, directory
    finally:
        if directory is not None:
            directory.stop()
        next(clusters, None)  # the cluster's own teardown, also when the caller failed


def start_accounting(cluster) -> None:
    """MariaDB and slurmdbd from their rendered pods; the names slurm.conf and slurmdbd.conf give them
    (Service names) served by the network's DNS as a cluster's DNS would."""
    for pod, service_name in (("e2e-database-0", storage(cluster.cluster, "-").host),
                              ("e2e-slurmdbd-0", slurmdbd_address(cluster.cluster))):
        cluster.dns.add(service_name, cluster.dns.register(pod))
        cluster.start(pod, cluster.pod("StatefulSet", pod.rsplit("-", 1)[0]))
