"""Container jobs on a node set: Pyxis (`srun --container-image`) and the enroot settings under it."""
from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator, Field, StringConstraints

from soperator.api.common import ApiModel, cel
from soperator.api.fields import PositiveQuantity, SecretName

# enroot.conf keys soperator writes: where enroot keeps its files on the node (node-local, one
# directory per user, see soperator/templates/enroot.conf.j2) and where its own parts are installed.
MANAGED_ENROOT_KEYS = frozenset({
    "ENROOT_LIBRARY_PATH", "ENROOT_SYSCONF_PATH", "ENROOT_RUNTIME_PATH", "ENROOT_CONFIG_PATH",
    "ENROOT_CACHE_PATH", "ENROOT_DATA_PATH", "ENROOT_TEMP_PATH"})
# enroot reads its config with `eval echo VALUE`: a value is plain words, never shell.
EnrootKey = Annotated[str, StringConstraints(pattern=r"^ENROOT_[A-Z0-9_]{1,60}$")]
EnrootValue = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9 ._,:=/+-]{0,256}$")]


def _own_enroot_keys(config: dict[str, str]) -> dict[str, str]:
    for key in config:
        if key in MANAGED_ENROOT_KEYS:
            raise ValueError(f"{key} is set by soperator (enroot's files stay node-local, per user)")
    return config


class Pyxis(ApiModel):
    """Container jobs on this node set's workers: Pyxis in slurmstepd, enroot in the jail.

    On, the node set's workers differ from the others in what a job step may do: tasks may create user
    namespaces (enroot runs containers in one, as the user) and the container runs without the
    runtime's seccomp profile, whose containerd variant refuses the pivot_root enroot enters a
    container with. Node sets without Pyxis keep both refusals."""

    enabled: bool = False
    storage_size: PositiveQuantity = Field(
        default="50Gi", description="sizeLimit of each worker's node-local volume for enroot's unpacked "
        "containers, image layer cache and runtime files (/run/enroot, per user); gone with the pod")
    enroot_config: Annotated[dict[EnrootKey, EnrootValue], Field(
        max_length=32, description="more enroot.conf settings (e.g. ENROOT_SQUASH_OPTIONS, "
        "ENROOT_MAX_PROCESSORS, ENROOT_ROOTFS_WRITABLE); the path settings are soperator's",
        json_schema_extra=cel((f"self.all(k, !(k in {sorted(MANAGED_ENROOT_KEYS)}))",
                               "enrootConfig may not set the path settings soperator writes"))),
        AfterValidator(_own_enroot_keys)] = Field(default_factory=dict)
    registry_credentials_secret: Optional[SecretName] = Field(
        default=None, description="a Secret whose key '.credentials' holds enroot's credentials (netrc "
        "lines) for registry pulls; every user of this node set's jobs can read it")
