// Package main builds the upstream kubectl unchanged, from the same release as the control plane,
// so the tests' client is never outside Kubernetes' version skew.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Verbosity is read before the command is built, as upstream's main does.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
