"""What a login shell or a job step may reach over the network: one NetworkPolicy for the egress of
the cluster's login and worker pods.

Allowed: the pods of the cluster's own namespace (Slurm's own traffic, srun's ports), port 53 of the
cluster's DNS only (`networkPolicy.dns`: its pods, and addresses such as a node-local cache's), and
every address outside `blockedEgressCidrs` (the internet, for pip and git). The blocked ranges default to the private, shared and link-local ones, where a Kubernetes
cluster keeps its API server, kubelets, Service IPs, other namespaces' pods and cloud metadata.
Turned off, the policy allows all egress instead of disappearing, so the operator never deletes.
"""
from __future__ import annotations

from soperator.api.cluster import SlurmCluster
from soperator.api.spec import ClusterDns
from soperator.node.layout import COMPONENT_LABEL, LOGIN, NAMES, NETWORK_POLICY, WORKER
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


def node_egress_policy(cluster: SlurmCluster) -> Obj:
    policy = cluster.spec.network_policy
    instance = {k: v for k, v in selector_labels(cluster, WORKER).items() if k != COMPONENT_LABEL}
    selector = {"matchLabels": instance, "matchExpressions": [
        {"key": COMPONENT_LABEL, "operator": "In", "values": [LOGIN, WORKER]}]}
    if policy.enabled:
        blocked = list(policy.blocked_egress_cidrs)
        outside = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [c for c in blocked if ":" not in c]}},
                   {"ipBlock": {"cidr": "::/0", "except": [c for c in blocked if ":" in c]}}]
        egress = [{"to": [{"podSelector": {}}]}, {"to": dns_peers(policy.dns), "ports": DNS_PORTS}, {"to": outside}]
    else:
        egress = [{}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": metadata(cluster, node_egress_policy_name(cluster), NETWORK_POLICY),
            "spec": {"podSelector": selector, "policyTypes": ["Egress"], "egress": egress}}
