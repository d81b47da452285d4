package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones work without a system zoneinfo, as upstream

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as in the upstream mains
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as in the upstream mains
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as in the upstream mains
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// The three mains below are copies of k8s.io/kubernetes/cmd/<name>/<name>.go.
// cobra reads os.Args[1:], which main() has already rewritten.

func runKubeAPIServer() {
	os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
}

func runKubeControllerManager() {
	os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
}

func runKubeScheduler() {
	os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
}
