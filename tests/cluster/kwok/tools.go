//go:build tools

// KWOK's controller, built by package path: it simulates the kubelets of many Kubernetes nodes on
// the test control plane (the scale rig). The module is its own so that KWOK's k8s.io pins never
// meet the control plane's.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
