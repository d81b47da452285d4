// Command device-plugin-config-check reads device plugin config files the way NVIDIA's
// device plugin v0.18.0 does (api/config/v1: NewConfig with --config-file, then
// DisableResourceNamingInConfig) and prints, one JSON line per file, what the plugin made of
// it or why it refused it. It exits 1 when any file was refused.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	cli "github.com/urfave/cli/v2"
)

type resource struct {
	Name     string `json:"name"`
	Rename   string `json:"rename"`
	Devices  string `json:"devices"`
	Replicas int    `json:"replicas"`
}

type verdict struct {
	File                       string     `json:"file"`
	Accepted                   bool       `json:"accepted"`
	Error                      string     `json:"error,omitempty"`
	Strategy                   string     `json:"strategy,omitempty"`
	MigStrategy                string     `json:"migStrategy,omitempty"`
	RenameByDefault            bool       `json:"renameByDefault"`
	FailRequestsGreaterThanOne bool       `json:"failRequestsGreaterThanOne"`
	Resources                  []resource `json:"resources,omitempty"`
}

// load reads one file through the plugin's own entry point: a cli context whose
// --config-file names it, exactly as the plugin's daemon is started by the config manager.
func load(file string) (*spec.Config, error) {
	configFile := &cli.StringFlag{Name: "config-file"}
	flags := []cli.Flag{configFile}
	set := flag.NewFlagSet("nvidia-device-plugin", flag.ContinueOnError)
	set.String("config-file", "", "")
	if err := set.Set("config-file", file); err != nil {
		return nil, err
	}
	c := cli.NewContext(&cli.App{Flags: flags}, set, nil)
	config, err := spec.NewConfig(c, flags)
	if err != nil {
		return nil, err
	}
	spec.DisableResourceNamingInConfig(config)
	return config, nil
}

func check(file string) verdict {
	v := verdict{File: file}
	config, err := load(file)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Accepted = true
	v.Strategy = string(config.Sharing.SharingStrategy())
	if config.Flags.MigStrategy != nil {
		v.MigStrategy = *config.Flags.MigStrategy
	}
	ts := config.Sharing.TimeSlicing
	v.RenameByDefault = ts.RenameByDefault
	v.FailRequestsGreaterThanOne = ts.FailRequestsGreaterThanOne
	for _, r := range ts.Resources {
		devices := "all"
		if !r.Devices.All {
			devices = fmt.Sprint(r.Devices.List)
		}
		v.Resources = append(v.Resources, resource{
			Name:     string(r.Name),
			Rename:   string(r.Rename),
			Devices:  devices,
			Replicas: r.Replicas,
		})
	}
	return v
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: device-plugin-config-check FILE...")
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	status := 0
	for _, file := range os.Args[1:] {
		v := check(file)
		if !v.Accepted {
			status = 1
		}
		if err := out.Encode(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(status)
}
