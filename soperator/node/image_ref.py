"""A registry image reference as enroot reads one (docker://[REGISTRY#]NAME[:TAG][@DIGEST], or
docker://REGISTRY/NAME… when the first part has a dot or a port; Docker Hub otherwise), held to a strict
grammar before root's image cache runs anything with it. No user@ part: the cache pulls with the node
set's credentials only.

The cache keys an image by the registry and repository it came from and the manifest digest that
registry gave: a registry can only ever fill entries of its own repositories, so no user's registry can
answer for another's image. Standard library only (the node image)."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

DOCKER_HUB = "registry-1.docker.io"
REGISTRY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                      r"(?::[0-9]{1,5})?")
COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(rf"{COMPONENT}(?:/{COMPONENT}){{0,15}}")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class BadReference(ValueError):
    pass


@dataclass(frozen=True)
class ImageRef:
    registry: str
    repository: str
    tag: str
    digest: str | None = None

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def asked(self) -> str:
        """The enroot URI the cache asks the registry's digest for: as the user named it, in one form."""
        return f"docker://{self.registry}#{self.repository}" + (f"@{self.digest}" if self.digest else f":{self.tag}")

    def pinned(self, digest: str) -> str:
        """The enroot URI of this repository at `digest` (enroot fetches the manifest by it)."""
        return f"docker://{self.registry}#{self.repository}@{digest}"

    def key(self, digest: str) -> str:
        """The cache's key of this repository's manifest `digest`."""
        return "sha256:" + hashlib.sha256(f"{self.name}@{digest}".encode()).hexdigest()


def parse(uri: str) -> ImageRef:
    if not uri.startswith("docker://"):
        raise BadReference(f"only docker:// images come from a registry, not {uri[:80]!r}")
    rest, digest = uri[len("docker://"):], None
    if "@sha256:" in rest:
        rest, digest = rest.rsplit("@", 1)
        if not DIGEST.fullmatch(digest):
            raise BadReference(f"{digest[:80]!r} is not a sha256 digest")
    if "@" in rest:
        raise BadReference("a user@ in the image reference: images come with the node set's credentials only")
    if "#" in rest:
        registry, name = rest.split("#", 1)
    else:
        first, _, remainder = rest.partition("/")
        registry, name = (first, remainder) if remainder and ("." in first or ":" in first) else (DOCKER_HUB, rest)
    name, _, tag = name.partition(":")
    if registry == DOCKER_HUB and "/" not in name:
        name = f"library/{name}"
    for part, pattern, what in ((registry, REGISTRY, "registry"), (name, REPOSITORY, "repository"),
                                (tag or "latest", TAG, "tag")):
        if not pattern.fullmatch(part):
            raise BadReference(f"{part[:80]!r} is not a {what} name")
    return ImageRef(registry, name, tag or "latest", digest)
