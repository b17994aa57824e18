"""What a login shell or a job step may reach over the network: one NetworkPolicy for the egress of
the cluster's login and worker pods; and who may reach the controller: one for its ingress.

Allowed: the pods of the cluster's own namespace (Slurm's own traffic, srun's ports), port 53 of the
cluster's DNS only (`networkPolicy.dns`: its pods, and addresses such as a node-local cache's), and
every address outside `blockedEgressCidrs` (the internet, for pip and git). The blocked ranges default to the private, shared and link-local ones, where a Kubernetes
cluster keeps its API server, kubelets, Service IPs, other namespaces' pods and cloud metadata.
Turned off, the policy allows all egress instead of disappearing, so the operator never deletes.
"""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.api.spec import ClusterDns
from soperator.node.layout import (COMPONENT_LABEL, CONTROLLER, LOGIN, NAMES, NETWORK_POLICY, PORTS, REST_CLIENT_LABEL,
                                   WORKER)
from soperator.render.common import Obj, metadata, object_name, selector_labels

DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


def node_egress_policy_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, NAMES.node_egress)


def dns_peers(dns: ClusterDns) -> list[Obj]:
    """The DNS pods by namespace and labels (a Service's address is translated to theirs before the
    policy is applied), and any further servers by address."""
    pods = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": dns.namespace}},
            "podSelector": {"matchLabels": dict(dns.pod_labels)}}
    return [pods, *({"ipBlock": {"cidr": cidr}} for cidr in dns.cidrs)]


def _directory(cluster: SlurmCluster) -> list[Obj]:
    """spec.identity's servers on their ports, where the spec gives their addresses."""
    identity = cluster.spec.identity
    if identity is None or not identity.ldap.egress_cidrs:
        return []
    return [{"to": [{"ipBlock": {"cidr": c}} for c in identity.ldap.egress_cidrs],
             "ports": [{"protocol": "TCP", "port": p} for p in identity.ldap.ports()]}]


def node_egress_policy(cluster: SlurmCluster) -> Obj:
    policy = cluster.spec.network_policy
    instance = {k: v for k, v in selector_labels(cluster, WORKER).items() if k != COMPONENT_LABEL}
    selector = {"matchLabels": instance, "matchExpressions": [
        {"key": COMPONENT_LABEL, "operator": "In", "values": [LOGIN, WORKER]}]}
    if policy.enabled:
        blocked = list(policy.blocked_egress_cidrs)
        outside = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [c for c in blocked if ":" not in c]}},
                   {"ipBlock": {"cidr": "::/0", "except": [c for c in blocked if ":" in c]}}]
        egress = [{"to": [{"podSelector": {}}]}, {"to": dns_peers(policy.dns), "ports": DNS_PORTS}, {"to": outside},
                  *_directory(cluster)]
    else:
        egress = [{}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": metadata(cluster, node_egress_policy_name(cluster), NETWORK_POLICY),
            "spec": {"podSelector": selector, "policyTypes": ["Egress"], "egress": egress}}


def controller_ingress_policy_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, NAMES.controller_ingress)


def rest_clients(operator_namespace: str | None) -> dict:
    """The operator's pods: by their label, in the operator's namespace when it is known (the chart
    tells the operator), else in any namespace."""
    namespaces = {"matchLabels": {"kubernetes.io/metadata.name": operator_namespace}} if operator_namespace else {}
    return {"namespaceSelector": namespaces, "podSelector": {"matchLabels": {REST_CLIENT_LABEL: "true"}}}


def controller_ingress_policy(cluster: SlurmCluster, operator_namespace: str | None) -> Obj:
    """slurmctld's port stays open to every pod (workers, login nodes, slurmdbd, the populate Job's steps
    and the operator's metrics scrapes; munge authenticates RPCs, a token the HTTP server); slurmrestd's
    only to the operator, so a job step or a login shell cannot even try a token there. Turned off
    with the egress policy, it allows all instead of disappearing (the operator never deletes)."""
    tcp = lambda port: [{"protocol": "TCP", "port": port}]  # noqa: E731
    ingress = ([{"ports": tcp(PORTS.slurmctld)}, {"from": [rest_clients(operator_namespace)], "ports": tcp(PORTS.slurmrestd)}]
               if cluster.spec.network_policy.enabled else [{}])
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": metadata(cluster, controller_ingress_policy_name(cluster), NETWORK_POLICY),
            "spec": {"podSelector": {"matchLabels": selector_labels(cluster, CONTROLLER)},
                     "policyTypes": ["Ingress"], "ingress": ingress}}
