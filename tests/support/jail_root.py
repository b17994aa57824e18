"""What root in a job step may not change on its worker: what slurmd and slurmstepd read from outside
the jail (docs/security.md, #61's first finding as the review tried it: a plugin line appended to the
configless copy of plugstack.conf), and munged's socket directory. Shared by the kubelet tests of
each kind of worker (hostUsers true and false, cgroup v1 and v2)."""
from __future__ import annotations

# Each subshell's error (a redirection the shell cannot open) goes to stdout, marked.
PLANT = ("(echo required /planted.so >> /var/spool/slurmd/conf-cache/plugstack.conf) 2>&1 | sed \"s/^/conf-cache: /\"; "
         "(: > /run/munge/planted) 2>&1 | sed \"s/^/munge-dir: /\"; true")


def node_files_stay_the_nodes(login, worker: str) -> None:
    """Root's step on `worker` is refused both writes, and the worker's next step starts (with the line
    in, slurmstepd failed to load the plugin and Slurm drained the node)."""
    out = login.run(f"srun -w {worker} sh -c '{PLANT}'")
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert "Read-only file system" in lines.get("conf-cache", ""), out
    assert "Read-only file system" in lines.get("munge-dir", ""), out
    assert login.run(f"srun -w {worker} echo started").strip() == "started"
