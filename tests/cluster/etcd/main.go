// Package main builds etcd's own server from its Go module, at the release kubeadm pairs with the
// Kubernetes release in ../go.mod (Debian's etcd-server is 3.4, which no supported Kubernetes runs on).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
