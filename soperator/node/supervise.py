"""A tiny process supervisor for node containers: start daemons, forward SIGTERM, die with any of them,
and reap every orphan the container's processes leave behind."""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Callable


PR_SET_CHILD_SUBREAPER = 36
# A restartable helper's pause before it starts again: doubled at each exit, from MIN to MAX seconds.
RESTART_PAUSE_MIN, RESTART_PAUSE_MAX = 1.0, 60.0


class Supervisor:
    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        # Run once the daemon of that name has stopped for good (SIGTERM: the pod is going away),
        # while the daemons started before it still run.
        self.after_stop: dict[str, Callable[[], None]] = {}
        # [interval, next due, work]: run by wait()'s loop, in the main thread, between reaps.
        self.periodic: list[list] = []
        # Log followers (tail -F): stopped last, after a moment, so a daemon's last words (why it
        # exited) reach the pod's log before the follower goes.
        self.followers: set[str] = set()
        # Helpers no job depends on (the image cache): one that exits is started again, never taking
        # the node, and the jobs on it, down with it. name -> (argv, Popen keywords).
        self.restartable: dict[str, tuple[list[str], dict]] = {}
        self.restart_pause: dict[str, float] = {}
        self.restarts_due: dict[str, tuple[float, int]] = {}
        self.stopping = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        # Orphans come to us (as PID 1 they would anyway): slurmstepd daemonizes for every job step,
        # and login sessions leave background children. Unreaped, each stays a zombie that counts
        # against its user's process limit.
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def start(self, name: str, argv: list[str], after_stop: Callable[[], None] | None = None,
              **kw) -> subprocess.Popen:
        log(f"starting {name}: {' '.join(argv)}")
        proc = subprocess.Popen(argv, **kw)
        self.procs[name] = proc
        if after_stop:
            self.after_stop[name] = after_stop
        return proc

    def start_restartable(self, name: str, argv: list[str], **kw) -> subprocess.Popen:
        self.restartable[name] = (argv, kw)
        return self.start(name, argv, **kw)

    def _restart(self, name: str, code: int) -> None:
        """A restartable helper exited: start it again, after a pause that doubles while it keeps
        failing (up to RESTART_PAUSE_MAX s), in the wait loop's turns; a failed start is logged and
        tried again, never raised."""
        if name in self.restarts_due:
            if time.monotonic() < self.restarts_due[name][0]:
                return
        else:
            pause = min(RESTART_PAUSE_MAX, 2 * self.restart_pause.get(name, RESTART_PAUSE_MIN / 2))
            self.restart_pause[name] = pause
            self.restarts_due[name] = (time.monotonic() + pause, code)
            log(f"{name} exited with {code}; starting it again in {pause:.0f} s (the node and its jobs go on)")
            return
        del self.restarts_due[name]
        argv, kw = self.restartable[name]
        try:
            self.start(name, argv, **kw)
        except OSError as exc:
            log(f"{name} could not start again: {exc}")
            self.procs[name].returncode = code  # still gone: the next turn schedules another try

    def every(self, interval: float, work: Callable[[], None]) -> None:
        """Run `work` every `interval` seconds from wait()'s loop. Anything that starts processes
        belongs here, not in a thread: reap() collects every exited child, a thread's too."""
        self.periodic.append([interval, time.monotonic() + interval, work])

    def _stop(self, signum, _frame) -> None:
        self.stopping = True  # wait() does the stopping, in order, outside the signal handler

    def follow(self, name: str, path: str) -> subprocess.Popen:
        """Copy a daemon's log file to the pod's log (polled every 0.2 s)."""
        open(path, "a").close()
        self.followers.add(name)
        return self.start(name, ["tail", "-n", "+1", "-s", "0.2", "-F", path])

    def stop(self) -> None:
        """Stop the daemons one by one, the last started first (each SIGTERM, then 30 s grace); the
        log followers last, once they have had time to copy what the others wrote last."""
        order = sorted(reversed(list(self.procs.items())), key=lambda item: item[0] in self.followers)
        for name, proc in order:
            if name in self.followers and proc.poll() is None:
                time.sleep(0.5)
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except PermissionError as exc:  # no CAP_KILL over another user's daemon: say so, go on
                    log(f"cannot stop {name} (pid {proc.pid}): {exc}; it dies with the container, unsaved")
                    continue
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            hook = self.after_stop.pop(name, None)
            if hook and self.stopping:
                hook()

    def reap(self) -> None:
        """Collect every child that has exited: our daemons (their exit code is kept for Popen) and orphans."""
        daemons = {proc.pid: proc for proc in self.procs.values()}
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in daemons:
                daemons[pid].returncode = os.waitstatus_to_exitcode(status)

    def wait(self) -> int:
        """Block until a daemon exits (then stop the rest) or SIGTERM arrives; return the exit code."""
        while True:
            self.reap()
            if self.stopping:
                self.stop()
                return 0
            for name, proc in list(self.procs.items()):
                code = proc.returncode
                if code is not None and name in self.restartable:
                    self._restart(name, code)
                elif code is not None:
                    log(f"{name} exited with {code}; stopping the node")
                    self.stop()
                    return code or 1
            self._run_due()
            time.sleep(0.5)

    def _run_due(self) -> None:
        now = time.monotonic()
        for task in self.periodic:
            if now >= task[1]:
                task[1] = now + task[0]
                try:
                    task[2]()
                except (OSError, subprocess.SubprocessError) as exc:  # next round tries again
                    log(f"periodic work failed: {exc}")


def log(message: str) -> None:
    print(f"soperator-node: {message}", file=sys.stderr, flush=True)


def wait_for_path(path: str, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False
