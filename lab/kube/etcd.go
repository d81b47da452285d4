package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

// runEtcd is go.etcd.io/etcd/server/v3/main.go. etcdmain parses os.Args
// itself (etcd flags, plus the `gateway` / `grpc-proxy` sub-commands).
// We link the etcd server version that k8s.io/kubernetes itself pins.
func runEtcd() {
	etcdmain.Main(os.Args)
}
