"""The Slurm releases a cluster can run, and which moves between them Slurm supports in place.

Slurm ships two major releases a year, YY.05 and YY.11. Since 24.11 its daemons upgrade in place from
the three previous majors (slurmdbd converts their records, slurmctld reads their state files, and a
newer slurmctld talks to older slurmd and clients), never backwards.
"""
from __future__ import annotations

from soperator import __version__

# The releases the operator renders config for and builds images of (images/build.py).
SUPPORTED = ("24.11", "26.05")
DEFAULT = "26.05"
# How many majors one in-place upgrade may jump (Slurm's upgrade guide, from 24.11 on).
UPGRADE_WINDOW = 3
# The first release of features the config and the probes use.
OPENMETRICS = "25.11"  # MetricsType, SlurmctldHttpAuthParameters; the daemons' /livez and /readyz
DATA_PARSER_V0_0_44 = "25.11"  # slurmrestd's v0.0.44 (24.11 serves up to v0.0.42)
HEALTH_CHECK_TIMEOUT = "25.05"
# HealthCheckNodeState's START_ONLY and REBOOT_ONLY: 24.11 ignores them and runs the check in every state.
HEALTH_CHECK_ALONE_STATES = "25.05"  # 24.11 stops at HealthCheckTimeout (measured: "unrecognized key")
# A dynamic or cloud node's place in topology.yaml's topology, set at registration or by an update
# (`Topology=`, REST's topology_str): 25.05 lets dynamic nodes join, 25.11 cloud nodes, and v0.0.44 sets it.
TOPOLOGY = "25.11"


def key(release: str) -> tuple[int, int]:
    year, month = release.split(".")
    return int(year), int(month)


def steps(old: str, new: str) -> int:
    """Major releases from `old` to `new` (negative: a downgrade): 24.11 → 26.05 is 3."""
    (y0, m0), (y1, m1) = key(old), key(new)
    return (y1 * 2 + (m1 >= 11)) - (y0 * 2 + (m0 >= 11))


def at_least(release: str, first: str) -> bool:
    return key(release) >= key(first)


def oldest(releases: list[str] | tuple[str, ...] | set[str]) -> str:
    return min(releases, key=key)


def image_tag(release: str) -> str:
    """The tag of the images `python -m images.build` makes for `release`: the operator's version for
    its default release, with the release appended for any other."""
    return __version__ if release == DEFAULT else f"{__version__}-slurm{release}"


def refusal(running: str, wanted: str) -> str | None:
    """Why a cluster on `running` may not move to `wanted` in place, or None."""
    n = steps(running, wanted)
    if n < 0:
        return (f"a downgrade from Slurm {running} to {wanted}: Slurm's daemons cannot read a newer release's "
                f"state or database; set slurmVersion back to {running}")
    if n > UPGRADE_WINDOW:
        return (f"Slurm {running} to {wanted} jumps {n} releases; Slurm upgrades in place over at most "
                f"{UPGRADE_WINDOW}: upgrade to an intermediate release first")
    return None
