// compose-config FILE...: loads Compose files as `docker compose -f FILE... config --format json` does (the
// same compose-go calls and options, without remote includes and image digests) and prints the project as
// JSON; on an invalid file it prints the loader's message and exits 1.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-config COMPOSE_FILE...")
		os.Exit(2)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(files []string) error {
	options, err := cli.NewProjectOptions(files,
		cli.WithWorkingDirectory(""),
		cli.WithOsEnv,
		cli.WithDotEnv,
		cli.WithConfigFileEnv,
		cli.WithDefaultConfigPath,
		cli.WithDefaultProfiles(),
		cli.WithName(""),
	)
	if err != nil {
		return err
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		return err
	}
	if project.Name == "" {
		return fmt.Errorf("project name can't be empty")
	}
	if project, err = project.WithServicesEnabled(); err != nil {
		return err
	}
	if project, err = project.WithSelectedServices(nil); err != nil {
		return err
	}
	project = project.WithoutUnnecessaryResources()
	if project, err = project.WithServicesEnvironmentResolved(true); err != nil {
		return err
	}
	if err = project.CheckContainerNameUnicity(); err != nil {
		return err
	}
	content, err := project.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(content)
	return err
}
