package main

import (
	"fmt"
	"runtime"

	etcdversion "go.etcd.io/etcd/api/v3/version"
	kubeversion "k8s.io/component-base/version"
	kwokversion "sigs.k8s.io/kwok/pkg/utils/version"
)

// printVersions answers `gpufleet-kube version`. The Kubernetes and kwok
// version variables are stamped by build.sh through -ldflags -X from go.mod;
// etcd's version is a constant of the linked etcd module.
func printVersions() {
	k := kubeversion.Get()
	fmt.Printf("kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler): %s (buildDate %s)\n", k.GitVersion, k.BuildDate)
	fmt.Printf("etcd: %s (api %s)\n", etcdversion.Version, etcdversion.APIVersion)
	fmt.Printf("kwok: %s\n", kwokversion.DisplayVersion())
	fmt.Printf("go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
