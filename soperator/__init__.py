"""soperator: Slurm clusters on Kubernetes whose nodes share one root filesystem (the jail)."""

__version__ = "0.1.0"
