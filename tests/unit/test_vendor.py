"""images/vendor.py: upstream archives enter a build only with the pinned checksum."""
from __future__ import annotations

import hashlib

import pytest

from images import vendor
from images.podman import PodmanError


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A vendor directory of the test's own, an empty cache, and no workspace copy."""
    monkeypatch.setattr(vendor, "STORE", tmp_path / "cache")
    monkeypatch.setattr(vendor, "ROOT", tmp_path / "checkout")
    monkeypatch.setenv("SOPERATOR_VENDOR_DIR", str(tmp_path / "vendor"))
    (tmp_path / "vendor").mkdir()
    return tmp_path


def test_an_archive_with_the_pinned_sum_is_kept_in_the_cache(places):
    data = b"an upstream release\n"
    source = vendor.Source("pyxis", "9.9", hashlib.sha256(data).hexdigest())
    (places / "vendor" / source.filename).write_bytes(data)
    kept = vendor.archive(source)
    assert kept == places / "cache" / "pyxis-9.9.tar.gz" and kept.read_bytes() == data
    (places / "vendor" / source.filename).unlink()
    assert vendor.archive(source).read_bytes() == data  # from the cache now


def test_an_archive_that_differs_from_the_pin_is_refused_naming_where_it_looked(places):
    source = vendor.Source("enroot", "9.9", hashlib.sha256(b"the real one").hexdigest())
    (places / "vendor" / source.filename).write_bytes(b"tampered")
    with pytest.raises(PodmanError) as refused:
        vendor.archive(source)
    assert "enroot-9.9.tar.gz" in str(refused.value) and str(places / "vendor") in str(refused.value)
    assert not (places / "cache" / source.filename).exists()


def test_every_pinned_source_has_a_full_sha256():
    assert set(vendor.SOURCES) == {"pyxis", "enroot"}
    assert all(len(s.sha256) == 64 and int(s.sha256, 16) >= 0 for s in vendor.SOURCES.values())


def test_an_upstream_source_is_name_url_and_sum():
    digest = "ab" * 32
    source = vendor.from_upstream(f"pyxis=https://example.invalid/v0.24.0.tar.gz@{digest}")
    assert (source.name, source.version, source.url, source.sha256) == (
        "pyxis", "0.24.0", "https://example.invalid/v0.24.0.tar.gz", digest)
    for bad in ("pyxis=https://x/y.tar.gz", f"slurm=https://x/y.tar.gz@{digest}", f"pyxis=@{digest}"):
        with pytest.raises(PodmanError, match="NAME=URL@SHA256"):
            vendor.from_upstream(bad)
