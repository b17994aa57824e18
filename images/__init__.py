"""Container images of the Slurm nodes, the jail and populate-jail, and their podman build."""
