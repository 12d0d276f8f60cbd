package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/settings"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the default settings file, or check one",
		Long: `config works with the settings file that adk serve, coordinator, worker and
store read with --config: one JSON document with a section per role
("log", "coordinator", "worker", "store", "signals", "serve", "api").
Flags of those commands win over the file, the file over the defaults.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "defaults",
		Short: "Print the full default settings file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(settings.Defaults().JSON())
			return err
		},
	}, &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a settings file: every key's bounds and cross-constraints",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := settings.Load(args[0])
			if err == nil {
				err = f.Validate()
			}
			if err != nil {
				return settingsError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", args[0])
			return nil
		},
	})
	return cmd
}
