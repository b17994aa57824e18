//go:build tools

// Package tools pins the container runtime's programs: containerd, its runc shim and ctr from
// containerd's module, runc from its own. They are built with `go build <package>` from this module,
// so go.sum verifies every dependency.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/opencontainers/runc"
)
