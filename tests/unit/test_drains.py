"""The one module of drain reasons: each reason is written in it and nowhere else, and ownership is
its prefix on a drained node only."""
from __future__ import annotations

import pytest

from soperator.node import drains
from tests.support_paths import ROOT


def test_each_reason_is_spelled_out_once():
    sources = [p for p in (ROOT / "soperator").rglob("*") if p.suffix in (".py", ".j2") and p.name != "drains.py"]
    sources += [p for p in (ROOT / "images").rglob("*") if p.is_file() and p.suffix in (".py", ".sh", "")]
    for reason in drains.ALL:
        head = reason.split(":")[0] + ":" + reason.split(":")[1][:8]  # enough to catch a copy of it
        found = [str(p.relative_to(ROOT)) for p in sources if head in p.read_text(errors="replace")]
        assert not found, f"drain reason {reason!r} written outside soperator/node/drains.py: {found}"


@pytest.mark.parametrize("flags, reason, own, expected", [
    (["DRAIN"], "soperator: scale-in of node set cpu", drains.SCALE_IN, True),
    (["DRAIN"], "soperator: update of node set cpu", drains.SCALE_IN, False),  # another operation's
    (["DRAIN"], "admin: soperator: scale-in", drains.SCALE_IN, False),  # an admin's words, not a prefix
    ([], "soperator: scale-in of node set cpu", drains.SCALE_IN, False),  # resumed: no longer drained
    (["DRAIN", "COMPLETING"], drains.POPULATE_HOLD, drains.POPULATE_HOLD, True),
])
def test_a_drain_is_owned_by_its_reasons_prefix(flags, reason, own, expected):
    assert drains.owned(flags, reason, own) is expected
