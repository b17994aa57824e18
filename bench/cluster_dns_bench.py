"""Name lookups that fail while containers come and go, for the e2e network's two possible DNS
servers in one run: podman's aardvark-dns (a network with DNS on) and the harness's CoreDNS
(tests/support/cluster_dns.py). A container resolves another's name in a loop while a third
container is started and removed on the same network, over and over.

Run: python -m bench.cluster_dns_bench [--seconds 60]"""
from __future__ import annotations

import argparse
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from images.build import build_all, image_ref
from images.podman import podman, podman_env
from tests.support.cluster_dns import ClusterDns

# Counts lookups and failures, printing each failure's error (getent exits 2 for "not found").
LOOP = ('n=0; f=0; end=$(( $(date +%s) + {seconds} )); while [ $(date +%s) -lt $end ]; do n=$((n+1)); '
        'getent ahostsv4 target >/dev/null; rc=$?; [ $rc -eq 0 ] || {{ f=$((f+1)); echo "failed: exit $rc"; }}; done; echo "lookups $n failed $f"')


def churn(network: str, image: str, options: list[str], stop: threading.Event) -> int:
    cycles = 0
    while not stop.is_set():
        podman("run", "-d", "--name", f"{network}-churn", "--network", network, *options, "--entrypoint", "sleep",
               image, "60")
        podman("rm", "-f", "-t", "0", f"{network}-churn")
        cycles += 1
    return cycles


def measure(kind: str, seconds: int, work: Path) -> str:
    image = image_ref("controller")
    network = f"soperator-bench-{uuid.uuid4().hex[:8]}"
    dns = None
    try:
        if kind == "aardvark-dns":
            podman("network", "create", network)
            options = {"target": ["--network-alias", "target"], "resolver": [], "churn": []}
        else:
            podman("network", "create", "--disable-dns", network)
            dns = ClusterDns(network, work / "dns", image)
            dns.start()
            options = {name: ["--ip", dns.register(name), "--dns", dns.address]
                       for name in ("target", "resolver", "churn")}
        for name in ("target", "resolver"):
            podman("run", "-d", "--name", f"{network}-{name}", "--hostname", name, "--network", network,
                   *options[name], "--entrypoint", "sleep", image, str(seconds + 60))
        stop = threading.Event()
        cycles: list[int] = []
        churner = threading.Thread(target=lambda: cycles.append(churn(network, image, options["churn"], stop)))
        loop = subprocess.Popen(["podman", "exec", f"{network}-resolver", "bash", "-c", LOOP.format(seconds=seconds)],
                                env=podman_env(), stdout=subprocess.PIPE, text=True)
        churner.start()
        out = loop.communicate()[0].splitlines()
        stop.set()
        churner.join()
        errors = sorted({line for line in out if line.startswith("failed")})
        return f"{kind}: {out[-1]} while {cycles[0]} containers started and stopped; {', '.join(errors) or 'no errors'}"
    finally:
        for name in ("target", "resolver", "churn"):
            podman("rm", "-f", "-t", "0", f"{network}-{name}", check=False)
        if dns:
            dns.stop()
        podman("network", "rm", "-f", network, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args(argv)
    build_all(only=["controller"])
    with tempfile.TemporaryDirectory(prefix="soperator-bench-") as tmp:
        for kind in ("aardvark-dns", "coredns"):
            start = time.monotonic()
            print(measure(kind, args.seconds, Path(tmp) / kind), f"({time.monotonic() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
