"""The lock files pin every dependency pyproject.toml names, within its range, with hashes; the
operator's runtime lock agrees with the test lock on every shared package."""
from __future__ import annotations

import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.lockfile import ROOT, pins, unhashed

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RUNTIME = [Requirement(r) for r in PROJECT["project"]["dependencies"]]
TEST = [Requirement(r) for r in PROJECT["project"]["optional-dependencies"]["test"]]
BUILD = [Requirement(r) for r in PROJECT["build-system"]["requires"]]


@pytest.mark.parametrize(("lock", "wanted"), [("requirements.txt", RUNTIME),
                                              ("requirements-test.txt", RUNTIME + TEST + BUILD)])
def test_every_declared_dependency_is_pinned_inside_its_range(lock, wanted):
    pinned = pins(lock)
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in pinned, f"{lock} does not pin {req.name}: regenerate it (docs/testing.md, 'The lock files')"
        assert req.specifier.contains(pinned[name], prereleases=True), \
            f"{lock} pins {req.name}=={pinned[name]}, outside {req.specifier}: regenerate it"


@pytest.mark.parametrize("lock", ["requirements.txt", "requirements-test.txt"])
def test_every_pin_carries_hashes(lock):
    assert unhashed(lock) == []


def test_runtime_and_test_locks_agree():
    runtime, test = pins("requirements.txt"), pins("requirements-test.txt")
    assert {name: (version, test.get(name)) for name, version in runtime.items() if test.get(name) != version} == {}
