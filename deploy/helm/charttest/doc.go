// Package charttest lints and renders the Helm chart deploy/helm/adk with
// Helm's own Go packages and checks the rendered manifests.
//
// It is a separate module so that the adk module never links Helm or
// Kubernetes: `go list -deps ./...` of the main module stays free of them.
// It must not import the adk module; the container command lines it
// renders are written to testdata/args.txt, which cmd/adk's
// TestDeployHelmArgs parses with the binary's own flags.
package charttest
