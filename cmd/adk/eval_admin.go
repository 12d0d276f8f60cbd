package main

import (
	"context"
	"errors"

	"time"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/store/evalrecord"
)

// codeInvalidPruneBefore: --before / --older-than missing, both given, or
// not a time.
const codeInvalidPruneBefore = "invalid_prune_before"

// newClusterCall builds a `--cluster URL` command that runs do with the
// coordinator client, then closes the connection.
func newClusterCall(use, short string, args cobra.PositionalArgs, do func(cmd *cobra.Command, cf *clusterFlags, cl *client.Client, args []string) error, flags ...func(*cobra.Command)) *cobra.Command {
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, a []string) error {
			cl, done, err := cf.client()
			if err != nil {
				return err
			}
			defer done()
			return do(cmd, &cf, cl, a)
		},
	}
	cf.register(cmd)
	for _, f := range flags {
		f(cmd)
	}
	return cmd
}

// newEvalBaselinesCmd is `adk eval baselines get|put|list`: the HTTP
// API's baseline routes, on the Go client.
func newEvalBaselinesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baselines",
		Short: "Read, name and list baselines of a cluster scope: get NAME, put NAME JOB_ID, list",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usageError{errors.New("adk eval baselines needs a subcommand: get, put or list")}
		},
	}
	var limit int
	var cursor string
	cmd.AddCommand(
		newClusterCall("get NAME --nats URL", "Print a baseline with its result (JSON)", exactArgs(1),
			func(cmd *cobra.Command, cf *clusterFlags, cl *client.Client, a []string) error {
				b, err := cl.GetBaseline(cmd.Context(), cf.scope, a[0])
				if err != nil {
					return serviceError(err)
				}
				return writeJSON(cmd.OutOrStdout(), devapi.BaselineAnswer{Baseline: *b, Result: b.Result})
			}),
		newClusterCall("put NAME JOB_ID --nats URL", "Name a completed job's result as a baseline", exactArgs(2),
			func(cmd *cobra.Command, cf *clusterFlags, cl *client.Client, a []string) error {
				b, err := cl.PutBaseline(cmd.Context(), cf.scope, a[0], a[1])
				if err != nil {
					return serviceError(err)
				}
				return writeJSON(cmd.OutOrStdout(), devapi.BaselineAnswer{Baseline: *b, Result: b.Result})
			}),
		newClusterCall("list --nats URL", "List baselines by name, without their results (JSON page)", cobra.NoArgs,
			func(cmd *cobra.Command, cf *clusterFlags, cl *client.Client, _ []string) error {
				page, err := cl.ListBaselines(cmd.Context(), cf.scope, limit, cursor)
				if err != nil {
					return serviceError(err)
				}
				return writeJSON(cmd.OutOrStdout(), page)
			}, func(c *cobra.Command) {
				c.Flags().IntVar(&limit, "limit", 50, "baselines per page (1..1000)")
				c.Flags().StringVar(&cursor, "cursor", "", "page cursor (next_cursor of a previous listing)")
			}),
	)
	return cmd
}

// newEvalSetsCmd is `adk eval sets list|get`.
func newEvalSetsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sets",
		Short: "List and read the eval set revisions of a cluster scope: list, get ID VERSION",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usageError{errors.New("adk eval sets needs a subcommand: list or get")}
		},
	}
	var limit int
	var cursor string
	cmd.AddCommand(
		newClusterCall("list --nats URL", "List set revisions (JSON page)", cobra.NoArgs,
			func(cmd *cobra.Command, cf *clusterFlags, cl *client.Client, _ []string) error {
				page, err := cl.ListSets(cmd.Context(), cf.scope, limit, cursor)
				if err != nil {
					return serviceError(err)
				}
				return writeJSON(cmd.OutOrStdout(), page)
			}, func(c *cobra.Command) {
				c.Flags().IntVar(&limit, "limit", 50, "revisions per page")
				c.Flags().StringVar(&cursor, "cursor", "", "page cursor from a previous listing")
			}),
		newClusterCall("get ID VERSION --nats URL", "Print one set revision with its canonical body (JSON)", exactArgs(2),
			func(cmd *cobra.Command, cf *clusterFlags, cl *client.Client, a []string) error {
				rec, err := cl.GetSet(cmd.Context(), cf.scope, a[0], a[1])
				if err != nil {
					return serviceError(err)
				}
				return writeJSON(cmd.OutOrStdout(), devapi.SetAnswer{SetRecord: *rec, Set: rec.Body})
			}),
	)
	return cmd
}

// newEvalPruneCmd is `adk eval prune`.
func newEvalPruneCmd() *cobra.Command {
	var before string
	var olderThan time.Duration
	var opts evalrecord.PruneOptions
	return newClusterCall("prune --nats URL (--before RFC3339 | --older-than DURATION)",
		"Delete a scope's terminal jobs and unreferenced set revisions older than a time (one page; JSON)", cobra.NoArgs,
		func(cmd *cobra.Command, cf *clusterFlags, cl *client.Client, _ []string) error {
			switch {
			case (before == "") == (olderThan == 0):
				return &cliError{Code: codeInvalidPruneBefore, Detail: "give exactly one of --before and --older-than"}
			case olderThan < 0:
				return &cliError{Code: codeInvalidPruneBefore, Reason: "older_than", Detail: "must be positive"}
			case olderThan > 0:
				opts.Before = time.Now().Add(-olderThan).UnixMilli()
			default:
				t, err := time.Parse(time.RFC3339, before)
				if err != nil {
					return &cliError{Code: codeInvalidPruneBefore, Reason: "before", Detail: "want RFC 3339, e.g. 2026-01-02T15:04:05Z"}
				}
				opts.Before = t.UnixMilli()
			}
			res, err := cl.Prune(cmd.Context(), cf.scope, opts)
			if err != nil {
				return serviceError(err)
			}
			return writeJSON(cmd.OutOrStdout(), res)
		}, func(c *cobra.Command) {
			c.Flags().StringVar(&before, "before", "", "delete records older than this time (RFC 3339)")
			c.Flags().DurationVar(&olderThan, "older-than", 0, "delete records older than this long ago, e.g. 720h")
			c.Flags().IntVar(&opts.Limit, "limit", 0, "records to delete at most (0: the store's default page)")
			c.Flags().StringVar(&opts.Cursor, "cursor", "", "cursor of a previous prune with has_more")
			c.Flags().BoolVar(&opts.IncludeBaselines, "include-baselines", false, "also delete old baselines (and what only they kept)")
		})
}

// newClusterCmd is `adk cluster status`: the /dev/v1/cluster view.
func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect a cluster: adk cluster status",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usageError{errors.New("adk cluster needs a subcommand: status")}
		},
	}
	var cf clusterFlags
	status := &cobra.Command{
		Use:   "status --nats URL",
		Short: "Coordinators (leader, members, queue), workers (capacity, running), signal stream and store lag (JSON)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, err := cf.connect("adk-cli")
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			v := devapi.Cluster(ctx, client.New(nc, cf.timeout), nc)
			if v.Coordinator == nil && v.Signals == nil {
				return &cliError{Code: codeClusterUnavailable, Detail: "coordinator: " + v.CoordinatorError + "; signals: " + v.SignalsError}
			}
			return writeJSON(cmd.OutOrStdout(), v)
		},
	}
	cf.register(status)
	cmd.AddCommand(status)
	return cmd
}
