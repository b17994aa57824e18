"""The operator's only door to Slurm: slurmrestd, with short-lived JWTs signed by the cluster's key."""
from soperator.slurm.client import SlurmApiError, SlurmAuthError, SlurmError, SlurmRestClient, SlurmUnreachable
from soperator.slurm.nodes import SlurmJob, SlurmNode
from soperator.slurm.token import mint_token

__all__ = ["SlurmApiError", "SlurmAuthError", "SlurmError", "SlurmJob", "SlurmNode", "SlurmRestClient", "SlurmUnreachable",
           "mint_token"]
