package main

import (
	"os"

	"github.com/spf13/pflag"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectl "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

// runKubectl is a copy of k8s.io/kubernetes/cmd/kubectl/kubectl.go, from the
// same Kubernetes release as the control plane, so tests drive the lab with
// the client a user of that release has (port-forward, exec, logs...).
//
// Left out: the client auth plugins (k8s.io/client-go/plugin/pkg/client/auth,
// OIDC): the lab's kubeconfigs use certificates and tokens only.
func runKubectl() {
	// As for kwok: the control-plane packages linked into this binary register
	// flags (component-base's --version among them) on the global flag set,
	// which cobra would add to kubectl's. The upstream kubectl has none.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)

	logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := kubectl.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
