"""The e2e network's cluster DNS: CoreDNS, the DNS a Kubernetes cluster runs, in a container on the
network at a fixed address, answering the names the harness gives its containers from a hosts file.
A container's record is written, and served, before the container starts; its address is fixed by
the harness (`podman run --ip`) and kept for its name, so a container started again under its name
(a StatefulSet's pod) is found at once. Names the harness never gave get SERVFAIL (CoreDNS's hosts
plugin has no SOA to answer NXDOMAIN with; glibc reports "Temporary failure"), where a cluster DNS
would answer NXDOMAIN: nothing is forwarded off the machine.

Why not podman's own aardvark-dns: version 1.4 (Debian bookworm's) closes and reopens its sockets on
every reload, and reloads whenever a container on any network starts or stops (containers/aardvark-
dns#389); it forwards what it does not know (reverse lookups of new addresses took 10 s); and twice in
CI it did not answer slurmstepd's lookup of the controller as a container job ended, which Slurm
printed into the job's output. CoreDNS re-reads the hosts file in the background and swaps it whole:
the server never stops answering (bench/cluster_dns_bench.py counts both under container churn)."""
from __future__ import annotations

import ipaddress
import os
import time
from pathlib import Path

from images.podman import PodmanError, podman
from tests.cluster.build import coredns_binary
from tests.support.wait import until

COREFILE = """.:53 {
    errors
    hosts /etc/coredns/hosts {
        reload 100ms
    }
}
"""


class ClusterDns:
    def __init__(self, network: str, work: Path, image: str):
        self.network, self.work, self.image = network, work, image
        self.container = f"{network}-dns"
        self.records: dict[str, str] = {}
        self.address = ""
        self._free: list[str] = []

    def start(self) -> None:
        """Start CoreDNS on the network (created with --disable-dns) and check that a container on
        the network gets answers from it. PodmanError says what failed."""
        subnet = podman("network", "inspect", "--format", "{{range .Subnets}}{{.Subnet}}{{end}}",
                        self.network).stdout.strip()
        hosts = list(ipaddress.ip_network(subnet).hosts())
        # The first address is the bridge's (the gateway); the last is the DNS's, as a cluster's DNS
        # Service keeps one fixed address.
        self.address = str(hosts[-1])
        self._free = [str(ip) for ip in hosts[1:-1]]
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "Corefile").write_text(COREFILE)
        self.records[self.container] = self.address
        self._write_hosts()
        podman("run", "-d", "--name", self.container, "--network", self.network, "--ip", self.address,
               "--dns", "127.0.0.1", "-v", f"{coredns_binary()}:/usr/local/bin/coredns:ro",
               "-v", f"{self.work}:/etc/coredns:ro", "--entrypoint", "/usr/local/bin/coredns",
               self.image, "-conf", "/etc/coredns/Corefile")
        # CoreDNS may still be starting: ask until it answers, from a container as a pod would.
        deadline = time.monotonic() + 30
        while True:
            probe = podman("run", "--rm", "--network", self.network, "--dns", self.address, "--entrypoint",
                           "getent", self.image, "hosts", self.container, check=False)
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise PodmanError(f"containers on podman network {self.network} get no answer from its DNS "
                                  f"({self.address}): getent hosts {self.container} exited {probe.returncode} "
                                  f"{probe.stderr.strip()}; CoreDNS said: {self.logs()}")
            time.sleep(0.5)

    def register(self, name: str) -> str:
        """The address `name` runs at; its record is served before this returns."""
        if name not in self.records:
            if not self._free:
                raise PodmanError(f"no address left on {self.network} for {name}")
            self.records[name] = self._free.pop(0)
            self._write_hosts()
            until(lambda: self._served(name), 30, f"the cluster DNS to serve {name}", interval=0.1)
        return self.records[name]

    def add(self, name: str, address: str) -> None:
        """A record for something that is not a container on the network (a test's server on the host
        side of the bridge); served before this returns."""
        self.records[name] = address
        self._write_hosts()
        until(lambda: self._served(name), 30, f"the cluster DNS to serve {name}", interval=0.1)

    def gateway(self) -> str:
        """The host's address on the network (the bridge's)."""
        subnet = podman("network", "inspect", "--format", "{{range .Subnets}}{{.Subnet}}{{end}}",
                        self.network).stdout.strip()
        return str(next(ipaddress.ip_network(subnet).hosts()))

    def _served(self, name: str) -> bool:
        found = podman("exec", self.container, "getent", "ahostsv4", name, check=False)
        return found.returncode == 0 and found.stdout.split()[:1] == [self.records[name]]

    def _write_hosts(self) -> None:
        # Replaced whole, so CoreDNS never reads half a file.
        tmp = self.work / "hosts.new"
        tmp.write_text("".join(f"{ip} {name}\n" for name, ip in sorted(self.records.items())))
        os.replace(tmp, self.work / "hosts")

    def logs(self) -> str:
        return podman("logs", "--tail", "20", self.container, check=False).stderr.strip()

    def stop(self) -> None:
        podman("rm", "-f", "-t", "0", self.container, check=False)
