"""status.loginEndpoint (kubectl's LOGIN column): an address users can reach, or the Service's name."""
from __future__ import annotations

import pytest

from soperator.reconcile.core import _endpoint
from soperator.reconcile.observe import Snapshot
from tests.conftest import make_cluster


def _service(kind: str, node_port: int | None = None, ingress: list[dict] = ()) -> dict:
    return {"metadata": {"name": "demo-login"}, "spec": {"type": kind, "ports": [{"port": 22, "nodePort": node_port}]},
            "status": {"loadBalancer": {"ingress": list(ingress)}}}


def _login_pod(name: str, host_ip: str | None) -> dict:
    return {"metadata": {"name": name, "labels": {"app.kubernetes.io/component": "login"}},
            "status": {"hostIP": host_ip} if host_ip else {}}


@pytest.mark.parametrize("service, pods, expected", [
    (_service("LoadBalancer", 30022, [{"ip": "203.0.113.7"}]), [], "203.0.113.7:22"),
    (_service("LoadBalancer", 30022, [{"hostname": "login.example.org"}]), [], "login.example.org:22"),
    (_service("LoadBalancer", 30022), [], "demo-login.hpc.svc:22"),  # no address yet
    (_service("NodePort", 30471), [_login_pod("demo-login-1", "10.0.0.6"), _login_pod("demo-login-0", "10.0.0.5")],
     "10.0.0.5:30471"),
    (_service("NodePort", 30471), [_login_pod("demo-login-0", None)], "demo-login.hpc.svc:22"),  # not scheduled
    (_service("ClusterIP"), [], "demo-login.hpc.svc:22"),
    (None, [], None),
], ids=["lb-ip", "lb-hostname", "lb-pending", "node-port", "node-port-unscheduled", "cluster-ip", "no-service"])
def test_the_login_column_shows_a_reachable_address(service, pods, expected):
    children = {} if service is None else {("Service", "demo-login"): service}
    assert _endpoint(Snapshot(make_cluster(), {}, children, pods)) == expected
