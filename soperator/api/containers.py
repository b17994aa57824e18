"""Container jobs on a node set: Pyxis (`srun --container-image`) and the enroot settings under it."""
from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, model_validator

from soperator.api.common import ApiModel, AtField, cel
from soperator.api.fields import PositiveQuantity, SecretName, quantity_value
from soperator.node.layout import PATHS

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
    problem = squash_options_problem(config.get("ENROOT_SQUASH_OPTIONS", ""))
    if problem:
        raise ValueError(f"ENROOT_SQUASH_OPTIONS: {problem}")
    return config


# mksquashfs's compressors (squashfs-tools 4.6), their compression levels, and the -X options each takes
# with a value (level aside) or without one.
_COMPRESSORS = {"gzip": (range(1, 10), ("-Xwindow-size",), ("-Xstrategy",)),
                "lzo": (range(1, 10), ("-Xalgorithm",), ()), "lz4": (None, (), ("-Xhc",)),
                "xz": (None, ("-Xbcj", "-Xdict-size"), ()), "lzma": (None, (), ()), "zstd": (range(1, 23), (), ())}


def squash_options_problem(options: str) -> str | None:
    """What mksquashfs would refuse in ENROOT_SQUASH_OPTIONS (every import's squash ends there): an
    unknown compressor, a level or a -X option the compressor does not take, a block size that is not a
    power of two from 4K to 1M. Other options are mksquashfs's to judge."""
    words = options.split()
    compressor = (words[words.index("-comp") + 1] if "-comp" in words[:-1] else "") if "-comp" in words else "gzip"
    if compressor not in _COMPRESSORS:
        return f"-comp {compressor}: mksquashfs compresses with one of {', '.join(_COMPRESSORS)}"
    levels, with_value, alone = _COMPRESSORS[compressor]
    for i, word in enumerate(words):
        value = words[i + 1] if i + 1 < len(words) else ""
        if word == "-Xcompression-level":
            if levels is None:
                return f"{compressor} takes no -Xcompression-level"
            if not value.isdigit() or int(value) not in levels:
                return f"-Xcompression-level {value}: {compressor} takes {levels[0]} to {levels[-1]}"
        elif word.startswith("-X") and word not in with_value + alone:
            return f"{word} is not an option of {compressor}"
        elif word == "-b":
            match = re.fullmatch(r"([0-9]+)([KM]?)", value)
            size = int(match[1]) * {"": 1, "K": 2**10, "M": 2**20}[match[2]] if match else 0
            if size < 4096 or size > 2**20 or size & (size - 1):
                return f"-b {value}: a block size is a power of two from 4K to 1M"
    return None


# The least image cache that holds an image (a small base image's squashfs is tens of MiB).
MIN_IMAGE_CACHE = "64Mi"

# A file under the kubelet's seccomp directory: plain names only, so never outside it.
LocalhostProfile = Annotated[str, StringConstraints(
    max_length=253, pattern=r"^[A-Za-z0-9_+-][A-Za-z0-9_+.-]*(/[A-Za-z0-9_+-][A-Za-z0-9_+.-]*)*$")]


class PyxisSeccompProfile(ApiModel):
    """The workers' seccomp profile, as a pod's securityContext names it."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("self.type == 'Localhost' || !has(self.localhostProfile)", "localhostProfile applies to type Localhost only")))

    type: Literal["Localhost", "Unconfined"] = Field(
        default="Localhost", description="Localhost: a profile installed on the nodes (the operator chart installs "
        "its own on every node); Unconfined: none, for nodes where no profile can be installed")
    localhost_profile: Optional[LocalhostProfile] = Field(
        default=None, description="its path under the kubelet's seccomp directory; default: soperator's own "
        "(soperator/pyxis-worker-<digest>.json: the runtime's default profile plus pivot_root)")

    @model_validator(mode="after")
    def _path_for_localhost_only(self) -> "PyxisSeccompProfile":
        if self.type != "Localhost" and self.localhost_profile is not None:
            raise AtField(("localhostProfile",), "applies to type Localhost only")
        return self


class PyxisImageCache(ApiModel):
    """Registry images (docker://), imported once per worker and shared by every user of the node."""

    enabled: bool = Field(
        default=True, description="registry images are imported by root on each worker, once, into a cache "
        "every user reads and none can write, keyed by the image's manifest digest, with the node set's "
        "registry credentials; off: this node set's jobs run squashfs files only (a user cannot import an "
        "image in the jail: enroot needs privileges for it that job steps never have)")
    size: Optional[PositiveQuantity] = Field(
        default=None, description="the most the cache keeps on each worker, in the node-local volume of "
        "storageSize (so no more than it; default: half of it, leaving room for imports, which unpack "
        "there, and users' named containers): the least recently used images go first to make room")


class Pyxis(ApiModel):
    """Container jobs on this node set's workers: Pyxis in slurmstepd, enroot in the jail.

    On, the node set's workers differ from the others in what a job step may do: tasks may create user
    namespaces (enroot runs containers in one, as the user) and the container's seccomp profile is
    the runtime's default plus the pivot_root enroot enters a container with (seccompProfile), which
    containerd's default refuses. Node sets without Pyxis keep both refusals."""

    enabled: bool = False
    storage_size: PositiveQuantity = Field(
        default="50Gi", description="sizeLimit of each worker's node-local volume for enroot's unpacked "
        f"containers, image layer cache and runtime files ({PATHS.enroot_runtime}, per user); gone with the pod")
    enroot_config: Annotated[dict[EnrootKey, EnrootValue], Field(
        max_length=32, description="more enroot.conf settings (e.g. ENROOT_SQUASH_OPTIONS, "
        "ENROOT_MAX_PROCESSORS, ENROOT_ROOTFS_WRITABLE); the path settings are soperator's",
        json_schema_extra=cel((f"self.all(k, !(k in {sorted(MANAGED_ENROOT_KEYS)}))",
                               "enrootConfig may not set the path settings soperator writes"))),
        AfterValidator(_own_enroot_keys)] = Field(default_factory=dict)
    registry_credentials_secret: Optional[SecretName] = Field(
        default=None, description="a Secret whose key '.credentials' holds enroot's credentials (netrc "
        "lines) for registry pulls; every user of this node set's jobs can read it")
    seccomp_profile: PyxisSeccompProfile = Field(default_factory=PyxisSeccompProfile)
    image_cache: PyxisImageCache = Field(default_factory=PyxisImageCache)

    model_config = ConfigDict(json_schema_extra=cel((
        "!has(self.imageCache) || !has(self.imageCache.size) || !has(self.storageSize) || "
        "quantity(string(self.imageCache.size)).compareTo(quantity(string(self.storageSize))) < 0",
        "imageCache.size must be less than storageSize: the cache lives in that volume, and imports unpack there"), (
        "!has(self.imageCache) || !has(self.imageCache.size) || "
        f"quantity(string(self.imageCache.size)).compareTo(quantity('{MIN_IMAGE_CACHE}')) >= 0",
        f"imageCache.size: at least {MIN_IMAGE_CACHE}, or no image fits")))

    @property
    def image_cache_bytes(self) -> int:
        """The cache's limit: its size, or half of the volume."""
        if self.image_cache.size is not None:
            return int(quantity_value(self.image_cache.size))
        return int(quantity_value(self.storage_size)) // 2

    @model_validator(mode="after")
    def _cache_in_volume(self) -> "Pyxis":
        if self.image_cache.size is None:
            return self
        size, volume = quantity_value(self.image_cache.size), quantity_value(self.storage_size)
        if size < quantity_value(MIN_IMAGE_CACHE):
            raise AtField(("imageCache", "size"), f"{self.image_cache.size}: at least {MIN_IMAGE_CACHE}, or no image "
                                                  "fits in the cache")
        room = min(2**30, volume / 2)
        if size > volume - room:
            raise AtField(("imageCache", "size"), f"{self.image_cache.size} leaves less than "
                          f"{'1Gi' if room == 2**30 else 'half'} of storageSize ({self.storage_size}) free: the cache "
                          "lives in that volume, and imports unpack there")
        return self
