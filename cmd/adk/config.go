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
		Long: `config works with the settings file that adk serve, coordinator, worker,
store and api read with --config: one JSON document with a section per
role ("coordinator", "worker", "store", "signals", "serve", "api") and
the "log" section every one of them reads (--log-level, --log-format).
Flags of those commands win over the file, the file over the defaults;
a key with an environment variable (coordinator.result_tails:
$ADK_COORDINATOR_RESULT_TAILS) takes it between the flag and the file.`,
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
