// Command kube-1.35 holds the control-plane programs of Kubernetes 1.35 that a virtual
// cluster runs (kube-apiserver, kube-controller-manager, kube-scheduler), built from the Go
// module proxy, so the lab runs a virtual control plane at the version it asks for. The
// lab's own control plane, and 1.36 virtual clusters, run gpufleet-kube (lab/kube).
//
// Usage: kube-1.35 COMPONENT [component flags...], or a symlink named after a component.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	kubeversion "k8s.io/component-base/version"
)

var components = map[string]func(){
	"kube-apiserver":          runKubeAPIServer,
	"kube-controller-manager": runKubeControllerManager,
	"kube-scheduler":          runKubeScheduler,
}

func usage() {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: kube-1.35 COMPONENT [flags...]; components: %v, version\n", names)
}

func main() {
	// Busybox style: invoked through a file named after a component (as the syncer runs
	// the binaries the chart's init container copies).
	if run, ok := components[filepath.Base(os.Args[0])]; ok {
		run()
		return
	}
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "version" || name == "--version" {
		k := kubeversion.Get()
		fmt.Printf("kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler): %s (buildDate %s)\n", k.GitVersion, k.BuildDate)
		fmt.Printf("go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	run, ok := components[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube-1.35: unknown component %q\n", name)
		usage()
		os.Exit(2)
	}
	// Each component parses os.Args as if its own binary had been started.
	os.Args = append([]string{name}, os.Args[2:]...)
	run()
}
