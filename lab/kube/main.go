// Command gpufleet-kube is ONE multi-call binary holding every Kubernetes
// control-plane component the gpufleet lab needs: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and the kwok controller, plus kubectl
// for tests that use the cluster as a user would.
//
// Why one binary: the lab may not download anything from dl.k8s.io or GitHub
// releases, so everything is built from the Go module proxy. Linking all
// components into one executable shares the (large) common code, so it costs
// one link and one file instead of five.
//
// Usage: gpufleet-kube COMPONENT [component flags...]
// Everything after COMPONENT is handed untouched to the component's own flag
// parsing. Like busybox, a symlink named after a component (e.g. `etcd ->
// gpufleet-kube`) runs that component directly.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// component is the real main() of one program. It reads its flags from
// os.Args[1:] (the dispatcher rewrites os.Args before calling it) and never
// returns normally: each calls os.Exit itself or is killed by a signal.
type component struct {
	summary string
	run     func()
}

var components = map[string]component{
	"etcd":                    {"etcd server (go.etcd.io/etcd/server/v3 etcdmain)", runEtcd},
	"kube-apiserver":          {"Kubernetes API server", runKubeAPIServer},
	"kube-controller-manager": {"Kubernetes controller manager", runKubeControllerManager},
	"kube-scheduler":          {"Kubernetes scheduler", runKubeScheduler},
	"kubectl":                 {"kubectl, the Kubernetes command-line client", runKubectl},
	"kwok":                    {"kwok controller: simulates nodes and pods (sigs.k8s.io/kwok)", runKwok},
}

func usage() {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: gpufleet-kube COMPONENT [flags...]\n\n")
	fmt.Fprintf(os.Stderr, "components (all further flags go to the component; try COMPONENT --help / --version):\n")
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-24s %s\n", n, components[n].summary)
	}
	fmt.Fprintf(os.Stderr, "  %-24s %s\n", "version", "print the versions of all components")
}

func main() {
	// Busybox style: invoked through a symlink named after a component.
	if c, ok := components[strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")]; ok {
		c.run()
		return
	}
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	switch name {
	case "version", "--version", "-version":
		printVersions()
		return
	case "help", "--help", "-h", "-help":
		usage()
		return
	}
	c, ok := components[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "gpufleet-kube: unknown component %q\n\n", name)
		usage()
		os.Exit(2)
	}
	// Every component (etcd's flag set, cobra, kwok's pre-parsing of -c/-v,
	// klog) reads os.Args, so make it look exactly as if the component's own
	// binary had been started: argv[0] = component name, then its flags.
	os.Args = append([]string{name}, os.Args[2:]...)
	c.run()
}
