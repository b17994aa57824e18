"""Making a cluster's objects match its SlurmCluster: see core.reconcile."""
from soperator.reconcile.core import Result, reconcile

__all__ = ["Result", "reconcile"]
