"""The per-cluster locks kept in kopf's memo: one pass at a time per cluster, and a lock lives only
while a pass runs or waits for it."""
from __future__ import annotations

import threading

import pytest

from soperator.handlers import ClusterLocks


def test_a_second_pass_waits_and_the_lock_goes_with_the_last_pass():
    locks, order = ClusterLocks(), []
    first_in, release_first = threading.Event(), threading.Event()

    def first():
        with locks.holding("hpc", "a"):
            order.append("first in")
            first_in.set()
            release_first.wait(10)
            order.append("first out")

    def second():
        with locks.holding("hpc", "a"):
            order.append("second in")

    t1 = threading.Thread(target=first)
    t1.start()
    assert first_in.wait(10)
    t2 = threading.Thread(target=second)
    t2.start()
    with locks.holding("hpc", "b"):  # another cluster is not held up
        order.append("other cluster")
    t2.join(0.2)
    assert t2.is_alive() and len(locks) == 1  # waiting on the first pass's lock, not a new one
    release_first.set()
    t1.join(10)
    t2.join(10)
    assert order == ["first in", "other cluster", "first out", "second in"]
    assert len(locks) == 0  # nothing kept once no pass runs: a deleted cluster leaves nothing behind


def test_the_liveness_probe_fails_while_a_pass_runs_past_the_stuck_limit(monkeypatch):
    import kopf

    from soperator import handlers

    memo = handlers.new_memo([])
    assert handlers.passes(memo=memo) == "no pass running"
    inside, leave = threading.Event(), threading.Event()

    def stuck_pass():
        with memo.locks.holding("hpc", "a"):
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=stuck_pass)
    thread.start()
    try:
        assert inside.wait(10)
        assert handlers.passes(memo=memo).startswith("longest pass running: hpc/a, ")
        monkeypatch.setattr(handlers, "STUCK_PASS_SECONDS", 0.0)
        with pytest.raises(kopf.PermanentError, match="hpc/a.*stuck"):
            handlers.passes(memo=memo)
    finally:
        leave.set()
        thread.join(10)
    assert memo.locks.longest_pass() is None
