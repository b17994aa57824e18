"""What a topology change costs Slurm: `python -m bench.topology [--rounds N]`.

Three registered slurmds under one real slurmctld (tests/support/three_nodes.py, the node image's
Slurm). Each round, alternately:
- **tree move**: one node placed under a leaf switch Slurm has not seen (what a label change on a
  Kubernetes node does: the operator's one REST update; Slurm makes the switch), until `scontrol
  show topology` lists it there;
- **new block**: a block topology's new label value: topology.yaml rewritten with one more block,
  `scontrol reconfigure` (what the controller pod's watch runs when the file changes), then the
  operator's update retried until Slurm takes the node into the block.
Prints the median seconds of each and their ratio, and the REST calls each took.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from images.build import build_all
from soperator.render.configs import slurm_files
from soperator.slurm import SlurmApiError, SlurmRestClient, mint_token
from tests.conftest import make_cluster
from tests.support.rest_slurm import NAME, SPEC
from tests.support.three_nodes import CPU1, three_nodes

TREE = {"tree": {"levels": ["example.com/spine", "example.com/leaf"]}}
BLOCK = {"block": {"label": "example.com/nvl", "blockSizes": [2, 4]}}


def _listed(slurm, unit: str) -> bool:
    return any(line.split()[0].split("=", 1)[1] == unit and CPU1 in slurm.run("scontrol", "show", "hostnames",
                                                                                 _nodes(line)).split()
               for line in slurm.run("scontrol", "-o", "show", "topology").splitlines() if "Nodes=" in line)


def _nodes(line: str) -> str:
    return next((f.split("=", 1)[1] for f in line.split() if f.startswith("Nodes=")), "") or "x"


def tree_move(slurm, client: SlurmRestClient, round_: int) -> tuple[float, int]:
    leaf, calls = f"leaf-{round_}", client.calls
    started = time.monotonic()
    client.set_topology(CPU1, f"default:_root:spine-1:{leaf}")
    while not _listed(slurm, leaf):
        time.sleep(0.02)
    return time.monotonic() - started, client.calls - calls


def new_block(slurm, client: SlurmRestClient, round_: int) -> tuple[float, int]:
    blocks = tuple(f"nvl-{i}" for i in range(round_ + 2))
    files = slurm_files(make_cluster(name=NAME, topology=BLOCK, **SPEC), blocks=blocks)
    calls = client.calls
    started = time.monotonic()
    (slurm.box.work / "etc-slurm" / "topology.yaml").write_text(files["topology.yaml"])
    slurm.run("scontrol", "reconfigure")
    while True:
        try:
            client.set_topology(CPU1, f"default:{blocks[-1]}")
            break
        except SlurmApiError:
            time.sleep(0.05)  # slurmctld still on the files from before
    while not _listed(slurm, blocks[-1]):
        time.sleep(0.02)
    return time.monotonic() - started, client.calls - calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    build_all(only=["node"])
    results: dict[str, list[tuple[float, int]]] = {"tree move": [], "new block": []}
    with tempfile.TemporaryDirectory() as tmp:
        with three_nodes(Path(tmp) / "tree", TREE) as tree, \
                three_nodes(Path(tmp) / "block", BLOCK, blocks=("nvl-0",)) as block:
            clients = {name: SlurmRestClient(s.url, lambda s=s: mint_token(s.key), retries=0)
                       for name, s in (("tree", tree), ("block", block))}
            for round_ in range(args.rounds):
                results["tree move"].append(tree_move(tree, clients["tree"], round_))
                results["new block"].append(new_block(block, clients["block"], round_))
    medians = {name: statistics.median(s for s, _ in runs) for name, runs in results.items()}
    for name, runs in results.items():
        print(f"{name}: median {medians[name]:.3f} s of {len(runs)} ({', '.join(f'{s:.3f}' for s, _ in runs)}); "
              f"REST calls {', '.join(str(c) for _, c in runs)}")
    print(f"new block / tree move: x{medians['new block'] / medians['tree move']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
