package main

import (
	"os"

	"github.com/spf13/pflag"

	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

// runKwok is a copy of sigs.k8s.io/kwok/cmd/kwok/main.go. Its log and config
// packages pre-parse os.Args[1:] for -v and -c/--config (unknown flags are
// allowed there) before cobra parses the rest.
//
// Note: kwok refuses to start ("no stages found") unless stages come from a
// --config file or from --enable-crds=Stage; lab/kube/stages/ has the default
// fast node and pod stages.
func runKwok() {
	// cobra adds the global pflag.CommandLine to every root command. In this
	// shared binary it holds flags that Kubernetes packages register at init,
	// notably component-base's --version (not a bool), which makes cobra fail
	// with `"version" flag declared as non-bool`. The standalone kwok binary
	// has none of them, so give kwok an empty global set; cobra then adds its
	// own --version (printing kwok's version).
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)

	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)

	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		os.Exit(1)
	}

	command := cmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		os.Exit(1)
	}
}
