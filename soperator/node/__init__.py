"""Code that runs inside the node containers (entrypoints). Standard library only: the images copy
this package as `soperator_node` without the operator's dependencies."""
