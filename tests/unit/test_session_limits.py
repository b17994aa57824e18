"""What a login node writes into each ssh user's cgroup (soperator/node/session_limits.py); the whole
path, sshd's PAM session into the cgroup and a hog killed there, is tested on the real kubelet
(tests/kube/test_user_path.py)."""
from __future__ import annotations

from soperator.node.session_limits import cpu_quota_us, main, v1_cpu_limits, v1_memory_limits, v2_limits


def test_cpu_quota_per_period_capped_at_the_pods_on_v1():
    assert cpu_quota_us(2000) == 200_000 and cpu_quota_us(500) == 50_000
    assert cpu_quota_us(1) == 1_000  # the kernel's smallest quota
    # The pod's own quota (1.5 CPUs in a 50 ms period) caps a v1 child: the kernel refuses more.
    assert cpu_quota_us(2000, parent_quota_us=75_000, parent_period_us=50_000) == 150_000
    assert cpu_quota_us(1000, parent_quota_us=75_000, parent_period_us=50_000) == 100_000
    assert cpu_quota_us(2000, parent_quota_us=-1) == 200_000


def test_v2_limits_and_no_swap_for_a_limited_session():
    assert v2_limits(2**30, 1500, has_swap=True) == [("memory.max", str(2**30)), ("memory.swap.max", "0"),
                                                     ("cpu.max", "150000 100000")]
    assert v2_limits(2**30, 0, has_swap=False) == [("memory.max", str(2**30))]
    assert v2_limits(0, 250, has_swap=True) == [("cpu.max", "25000 100000")]


def test_v1_limits_memory_before_memory_and_swap():
    assert v1_memory_limits(2**28, has_memsw=True) == [("memory.limit_in_bytes", str(2**28)),
                                                       ("memory.memsw.limit_in_bytes", str(2**28))]
    assert v1_memory_limits(0, has_memsw=True) == []
    assert v1_cpu_limits(500, -1, 100_000) == [("cpu.cfs_period_us", "100000"), ("cpu.cfs_quota_us", "50000")]
    assert v1_cpu_limits(0, -1, 100_000) == []


def test_only_a_known_user_other_than_root_is_moved_in_the_account_step(monkeypatch):
    """Other PAM steps, and root's logins, leave the cgroups alone (exit 0, nothing confined); an unknown
    user's login is refused."""
    moved, logged = [], []
    monkeypatch.setattr("soperator.node.session_limits.confine", lambda *args: moved.append(args))
    monkeypatch.setattr("soperator.node.session_limits._log", logged.append)
    monkeypatch.setenv("PAM_TYPE", "close_session")
    monkeypatch.setenv("PAM_USER", "nobody")
    assert main(["--memory", "1"]) == 0
    monkeypatch.setenv("PAM_TYPE", "open_session")
    assert main(["--memory", "1"]) == 0
    monkeypatch.setenv("PAM_TYPE", "account")
    monkeypatch.setenv("PAM_USER", "root")
    assert main(["--memory", "1"]) == 0 and moved == []
    monkeypatch.setenv("PAM_USER", "no-such-user-here")
    assert main(["--memory", "1"]) == 1 and moved == [] and logged == ["no such user 'no-such-user-here'"]
    monkeypatch.setenv("PAM_USER", "nobody")
    assert main(["--memory", "67108864", "--cpu", "500"]) == 0
    assert moved[0][1:] == (65534, 67108864, 500)
