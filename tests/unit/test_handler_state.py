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


def test_an_event_finding_a_pass_waiting_to_start_runs_none_of_its_own():
    """Coalescing: while one pass runs and a second waits for the lock, a third call runs no pass (the
    waiting one reads the cluster after the third's event). A call after the waiting pass started
    runs one of its own, since that pass may have read the cluster before the call's event."""
    locks, ran = ClusterLocks(), []
    first_in, release_first, second_in, release_second = (threading.Event() for _ in range(4))

    def call(tag, inside=None, release=None):
        with locks.holding("hpc", "a", coalesce=True) as run:
            ran.append((tag, run))
            if run and inside:
                inside.set()
                release.wait(10)

    t1 = threading.Thread(target=call, args=("first", first_in, release_first))
    t1.start()
    assert first_in.wait(10)
    t2 = threading.Thread(target=call, args=("second", second_in, release_second))
    t2.start()
    t2.join(0.2)
    call("third")  # the second waits to start: the third's change will be seen by it
    assert ran == [("first", True), ("third", False)]
    release_first.set()
    assert second_in.wait(10)
    t4 = threading.Thread(target=call, args=("fourth",))
    t4.start()
    t4.join(0.2)
    assert t4.is_alive(), "the second pass runs: the fourth waits for it, it does not skip"
    release_second.set()
    for t in (t1, t2, t4):
        t.join(10)
    assert ran == [("first", True), ("third", False), ("second", True), ("fourth", True)]
    assert len(locks) == 0


def test_a_pass_gathers_the_events_that_follow_its_own_before_it_starts():
    """With nothing running, the first event's pass waits gather_seconds; the events in that time run
    none. A periodic pass (gather=False) starts at once."""
    locks, ran = ClusterLocks(gather_seconds=0.5), []

    def call(tag, gather=True):
        with locks.holding("hpc", "a", coalesce=True, gather=gather) as run:
            ran.append((tag, run))

    first = threading.Thread(target=call, args=("first",))
    first.start()
    first.join(0.1)
    assert first.is_alive() and ran == [], "the first pass gathers before it starts"
    call("second")
    first.join(10)
    assert ran == [("second", False), ("first", True)]
    call("periodic", gather=False)
    assert ran[-1] == ("periodic", True)
