"""Paths the tests share."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
BAD_CRS = sorted((ROOT / "tests" / "data" / "bad_crs").glob("*.yaml"))
# Valid but unusual SlurmClusters: every one must stay accepted, by the CLI and by the apiserver.
GOOD_CRS = sorted((ROOT / "tests" / "data" / "good_crs").glob("*.*"))
CRD_FILE = ROOT / "crds" / "slurmclusters.slurm.soperator.dev.yaml"
# The seccomp profiles the operator chart ships (and its DaemonSet installs on the nodes).
SECCOMP_FILES = ROOT / "charts" / "slurm-operator" / "files" / "seccomp"
