"""Paths the tests share."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
BAD_CRS = sorted((ROOT / "tests" / "data" / "bad_crs").glob("*.yaml"))
CRD_FILE = ROOT / "crds" / "slurmclusters.slurm.soperator.dev.yaml"
