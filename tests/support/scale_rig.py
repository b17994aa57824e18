"""The scale rig: the operator's reconcile against a real control plane whose worker pods run on KWOK
nodes, and a real slurmctld and slurmrestd holding one Slurm record per Running worker pod.

Kubernetes side: etcd, kube-apiserver, controller-manager and scheduler as the kube tests run them
(tests/cluster/controlplane.py), with KWOK (tests/cluster/kwok.py) playing one kubelet per worker. The
StatefulSets, pods, PodDisruptionBudgets and events are the real objects the real controllers make.

Slurm side: slurmctld and slurmrestd in the node image's sandbox (tests/support/slurm.py). A worker
pod's slurmd would register its record when the pod starts and delete it when the pod stops
(soperator/node/roles.py); here `sync_records` does that for every pod at once, as State=EXTERNAL
records: IDLE at once, never pinged, drained and resumed as a real node is (Slurm 25.05+). Only
EXTERNAL jobs can run on them, so the rig holds no user jobs; tests that need a job on a node use
the sandboxes with real slurmds.

Each pass is `reconcile` in this process with the operator's own Kubernetes and REST clients, so
every API call is counted by verb and kind (Kube.calls) and every REST call and byte (SlurmRestClient).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import yaml

from soperator.keys import generate_jwt_key, generate_munge_key
from soperator.kube import Kube
from soperator.node.layout import NODE_SET_LABEL
from soperator.reconcile import reconcile
from soperator.render.configs import controller_host, slurm_files, worker_node_conf
from soperator.slurm import SlurmRestClient, mint_token
from tests.cluster.controlplane import ControlPlane
from tests.cluster.kwok import LABEL, PLANE_ARGS, TOLERATION, Kwok, create_nodes, node
from tests.cluster.tools import ensure_tools
from tests.conftest import make_cluster
from tests.support.rest_forward import RestForwarder
from tests.support.slurm import SlurmSandbox
from tests.support_paths import ROOT

API = "slurm.soperator.dev/v1alpha1"
NAME, NAMESPACE, SPOOL = "rig", "rig", "rig-spool"
SCHEDULING = {"tolerations": [TOLERATION], "nodeSelector": {LABEL: "true"}}
# Configs the sandbox's slurmctld can run (no cgroup hierarchy of its own); MaxNodeCount Slurm's most.
SLURM_CONFIG = {"maxNodeCount": 65535, "proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none"}


def spec(replicas: int, **node_set) -> dict:
    return {"nodeSets": [{"name": "cpu", "replicas": replicas, "scheduling": SCHEDULING, **node_set}],
            "controller": {"scheduling": SCHEDULING, "spool": {"claimName": SPOOL}},
            "login": {"replicas": 0, "scheduling": SCHEDULING},
            "jail": {"volume": {"hostPath": "/var/lib/soperator-rig/jail"}},
            "slurmConfig": SLURM_CONFIG}


def hostlist(names: list[str]) -> list[str]:
    """Slurm hostlist expressions for pod names (`rig-cpu-[0-99,120]`), one per prefix: a thousand
    names in one `scontrol` argument, not a thousand calls."""
    ordinals: dict[str, list[int]] = {}
    for name in names:
        prefix, _, ordinal = name.rpartition("-")
        ordinals.setdefault(prefix, []).append(int(ordinal))
    out = []
    for prefix, numbers in sorted(ordinals.items()):
        numbers.sort()
        runs, start = [], numbers[0]
        for prev, cur in zip(numbers, numbers[1:] + [None]):
            if cur != prev + 1:
                runs.append(f"{start}" if start == prev else f"{start}-{prev}")
                start = cur
        out.append(f"{prefix}-[{','.join(runs)}]")
    return out


@dataclass
class Rig:
    work: Path
    plane: ControlPlane
    kubectl: object
    kube: Kube  # the operator's: pods and nodes from its watched lists, as `soperator run` reads them
    reader: Kube  # the rig's own, uncounted and unwatched: what the apiserver holds now
    core: object
    box: SlurmSandbox
    rest: SlurmRestClient
    node_conf: str
    key: bytes
    records: dict[str, str] = field(default_factory=dict)  # Slurm node name: the uid of its pod

    def connect(self, kube, cluster, controller_ready):
        return self.rest if controller_ready else "the controller pod is not ready"

    def apply(self, replicas: int, **node_set) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump({
            "apiVersion": API, "kind": "SlurmCluster", "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": spec(replicas, **node_set)}))

    def body(self) -> dict:
        return self.reader.get(API, "SlurmCluster", NAMESPACE, NAME)

    def reconcile(self):
        return reconcile(self.kube, self.kube.get(API, "SlurmCluster", NAMESPACE, NAME), self.connect)

    def own_jwt_secret(self) -> None:
        """The JWT key Secret, made as the operator makes it (owned by the cluster) but holding the
        sandbox slurmctld's key, so that a running operator's tokens are accepted there."""
        from soperator.api import parse_cluster
        from soperator.render.secrets import jwt_key_secret

        self.reader.create(jwt_key_secret(parse_cluster(self.body()), self.key))

    @contextlib.contextmanager
    def operator(self) -> Iterator[OperatorProcess]:
        """The operator running as in production (the cluster applied first, with its key Secret)."""
        proc = OperatorProcess(self)
        try:
            yield proc
        finally:
            proc.stop()

    def start(self, replicas: int) -> None:
        """The cluster applied and past its populate gate. No populate pod runs here (it does not
        tolerate the KWOK taint): its Job is finished through the status subresource, as envtest
        users do."""
        from tests.kube.test_reconcile import _finish_job

        self.apply(replicas)
        self.reconcile()
        _finish_job(self.kubectl, NAMESPACE, f"{NAME}-populate-jail")

    def pods(self) -> list[dict]:
        return self.reader.list("v1", "Pod", NAMESPACE, f"{NODE_SET_LABEL}")

    def running(self) -> dict[str, str]:
        """Running worker pods not being deleted: name -> uid."""
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in self.pods()
                if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}

    def sync_records(self) -> tuple[int, int]:
        """One EXTERNAL record per Running worker pod, none for a pod gone: what the pods' slurmds
        would register and delete. A pod replaced under the same name (a rollout) is a new record, as
        the old pod's slurmd deleted its own when it stopped. (created, deleted)."""
        running = self.running()
        gone = sorted(n for n, uid in self.records.items() if running.get(n) != uid)
        new = sorted(n for n, uid in running.items() if self.records.get(n) != uid)
        for names in hostlist(gone):
            self.slurm("scontrol", "delete", f"NodeName={names}")
        for names in hostlist(new):
            self.slurm("scontrol", "create", f"NodeName={names}", "State=EXTERNAL", *self.node_conf.split())
        for name in gone:
            del self.records[name]
        self.records.update((n, running[n]) for n in new)
        return len(new), len(gone)

    def revision(self) -> str | None:
        """The pod template revision the StatefulSet and every worker pod are on; None while a rollout
        is under way (or the StatefulSet controller has not yet seen a new template)."""
        status = self.reader.get("apps/v1", "StatefulSet", NAMESPACE, f"{NAME}-cpu")["status"]
        pods = {p["metadata"]["labels"].get("controller-revision-hash") for p in self.pods()}
        return status.get("updateRevision") if pods == {status.get("updateRevision")} == \
            {status.get("currentRevision")} else None

    def slurm(self, *argv: str) -> str:
        proc = self.box.run(*argv, timeout=120)
        assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"
        return proc.stdout

    def slurm_states(self) -> Counter:
        """Slurm's nodes of the node set by state, as sinfo prints them."""
        text = self.slurm("sinfo", "-h", "-N", "-p", "main", "-o", "%N %t")
        return Counter(line.split()[1] for line in text.splitlines()
                       if line.split()[0] in self.records)

    def converge(self, done, timeout: float, what: str) -> int:
        """Passes (with the records following the pods) until `done()` holds; the passes it took."""
        deadline, passes = time.monotonic() + timeout, 0
        while True:
            self.sync_records()
            self.reconcile()
            passes += 1
            if done():
                return passes
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not reached in {timeout} s ({passes} passes)")
            time.sleep(1)


class OperatorProcess:
    """`soperator run` as the chart runs it, on the host: its kubeconfig the control plane's admin, its
    /metrics plain HTTP on loopback. The cluster's slurmrestd Service name resolves (a hosts file bound
    over /etc/hosts in a mount namespace of its own) to a relay into the sandbox's slurmrestd, so the
    operator's own client, tokens and key Secret are used unchanged."""

    def __init__(self, rig: "Rig"):
        from soperator.api import parse_cluster
        from soperator.render.controller import metrics_url, rest_url
        from tests.cluster.controlplane import free_port
        from tests.cluster.process import Component

        cluster = parse_cluster(rig.body())
        rest, ctld = urllib.parse.urlsplit(rest_url(cluster)), urllib.parse.urlsplit(metrics_url(cluster))
        # An address of its own in 127/8: Slurm's ports are fixed, and another test may use them on 127.0.0.1.
        address = f"127.{77 + os.getpid() % 100}.{os.getpid() // 100 % 250 + 1}.{os.getpid() % 250 + 1}"
        # slurmrestd, and slurmctld's own HTTP server (its metrics, read when the operator is scraped).
        self.forwarders = [RestForwarder(str(SlurmSandbox.rest_socket(rig.box.work)), (address, rest.port)),
                           RestForwarder(str(SlurmSandbox.ctld_socket(rig.box.work)), (address, ctld.port))]
        hosts = rig.work / "operator-hosts"
        hosts.write_text(f"127.0.0.1 localhost\n{address} {rest.hostname} {ctld.hostname}\n")
        self.metrics_port = free_port()
        env = [f"KUBECONFIG={rig.plane.kubeconfig}", "SOPERATOR_METRICS_AUTH=none",
               f"SOPERATOR_METRICS_PORT={self.metrics_port}", f"PYTHONPATH={ROOT}"]
        run = f"exec {sys.executable} -m soperator.cli run -n {NAMESPACE} --health-port {free_port()}"
        self.component = Component("soperator", [
            "env", *env, "unshare", "-m", "--propagation", "private", "sh", "-c",
            f"mount --bind {hosts} /etc/hosts && {run}"], rig.work / "operator.log")
        self.component.start()

    def metrics(self) -> dict[tuple[str, tuple], float]:
        """Every sample of its /metrics: (name, sorted labels) -> value."""
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def stop(self) -> None:
        self.component.stop()
        for forwarder in self.forwarders:
            forwarder.close()


def _spool_claim(core) -> None:
    """The controller's spool: a claim bound to a hostPath volume made for it (no provisioner here)."""
    from kubernetes import client

    core.create_persistent_volume(client.V1PersistentVolume(
        metadata=client.V1ObjectMeta(name=SPOOL), spec=client.V1PersistentVolumeSpec(
            capacity={"storage": "1Gi"}, access_modes=["ReadWriteOnce"], storage_class_name="",
            host_path=client.V1HostPathVolumeSource(path="/var/lib/soperator-rig/spool"),
            claim_ref=client.V1ObjectReference(namespace=NAMESPACE, name=SPOOL))))
    core.create_namespaced_persistent_volume_claim(NAMESPACE, client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name=SPOOL), spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"], storage_class_name="", volume_name=SPOOL,
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))


@contextlib.contextmanager
def scale_rig(nodes: int, watch: bool = True) -> Iterator[Rig]:
    """`nodes` KWOK nodes (one per worker, and the controller's) on a fresh control plane, the CRD and
    namespace made, the sandbox's slurmctld and slurmrestd up for a cluster of up to `nodes`
    workers; everything stopped and removed at the end. `watch`: the operator's pods and nodes from
    watched lists, as in production; False: listed every pass (to compare)."""
    from kubernetes import client

    from tests.kube.conftest import Kubectl, _configuration, install_crd

    work = Path(tempfile.mkdtemp(prefix="soperator-rig-"))
    plane = ControlPlane(work / "cp", extra_args=PLANE_ARGS)
    kwok = forwarder = box = None
    try:
        plane.start()
        kubectl = Kubectl(ensure_tools()["kubectl"], plane.kubeconfig)
        install_crd(kubectl)
        kubectl("create", "namespace", NAMESPACE)
        api = client.ApiClient(configuration=_configuration(plane))
        core = client.CoreV1Api(api)
        kwok = Kwok(plane, work / "kwok").start()
        create_nodes(core, [node(f"kwok-{i}") for i in range(nodes)])
        _spool_claim(core)
        cluster = make_cluster(name=NAME, **spec(nodes))
        key = generate_jwt_key()
        (work / "slurm").mkdir()
        box = SlurmSandbox(work / "slurm", slurm_files(cluster), controller_host(cluster), generate_munge_key(),
                           rest=True, jwt_key=key, prepare_jail=False)
        if not box.status["ready"]:
            raise AssertionError(f"sandbox not ready: {box.status}\n{box.log('slurmctld.log')}")
        forwarder = RestForwarder(str(SlurmSandbox.rest_socket(box.work)))
        rest = SlurmRestClient(forwarder.url, lambda: mint_token(key), retries=0)
        operator = Kube(client.ApiClient(configuration=_configuration(plane)), watch=watch)
        try:
            yield Rig(work, plane, kubectl, operator, Kube(api), core, box, rest,
                      worker_node_conf(cluster.spec.node_sets[0]), key)
        finally:
            if operator.watched:
                operator.watched.stop()
    finally:
        if forwarder:
            forwarder.close()
        if box:
            box.close()
        if kwok:
            kwok.stop()
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
