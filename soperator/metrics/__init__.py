"""The operator's /metrics: the server and its own figures (server.py), who may scrape (access.py:
TLS and RBAC-checked tokens), and each cluster's Slurm state read through slurmrestd (slurm.py)."""
