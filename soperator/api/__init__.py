"""SlurmCluster API: pydantic models, validation and the CRD generator."""
from soperator.api.cluster import API_VERSION, GROUP, KIND, PLURAL, VERSION, SlurmCluster
from soperator.api.spec import SlurmClusterSpec
from soperator.api.status import Condition, SlurmClusterStatus
from soperator.api.validate import FieldError, SpecError, parse_cluster

__all__ = ["API_VERSION", "GROUP", "KIND", "PLURAL", "VERSION", "SlurmCluster", "SlurmClusterSpec",
           "SlurmClusterStatus", "Condition", "FieldError", "SpecError", "parse_cluster"]
