// The Kubernetes provider plugin as pulumi-kubernetes builds it
// (provider/cmd/pulumi-resource-kubernetes/main.go at v4.25.0): the same Serve call with the
// same two embedded files. Upstream's main package cannot be built from the module zip: its
// embedded files are written by `go generate` (generate.go) and ignored by git, so the zip lacks
// them. tools/realtier/build.py writes them here from the module's schema.json and
// terraform-mapping.json, as generate.go does, before it builds.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
