// Package main builds the CNCF Distribution registry with only the filesystem storage driver: the
// e2e tests' registry (tests/support/image_registry.py), where enroot pulls docker:// images from.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
