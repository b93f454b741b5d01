// Command schema-provider is a stand-in for the hashicorp/google and
// hashicorp/archive Terraform providers, for offline checks only.
//
// It serves the real providers' schemas, read from the output of
// `terraform providers schema -json` (env SCHEMA_PROVIDER_JSON), so that
// `terraform validate` and `terraform test` with mock_provider check the
// configuration against the real arguments and types. It never talks to any
// cloud: planning passes the configuration through, and applying, reading or
// importing is refused.
//
// SCHEMA_PROVIDER_REHEARSAL=1 (off by default) turns on the rehearsal mode
// (rehearsal.go): plans mark computed attributes unknown, applies fill them in
// the shapes Google gives them, the root module's data sources get answers
// (archive_file really zips), refresh returns the state as it is. Google's
// control plane is stood in for; Terraform itself, the configuration, the
// state and the local-exec provisioners run for real.
//
// Which provider it plays comes from its own file name,
// terraform-provider-NAME, as Terraform's dev_overrides look it up.
// SCHEMA_PROVIDER_TYPES (names separated by white space or commas) limits the
// resource and data source types served, to keep Terraform fast.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tfprotov5/tf5server"
)

const binaryPrefix = "terraform-provider-"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "schema-provider:", err)
		os.Exit(1)
	}
}

func run() error {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), binaryPrefix)
	name = strings.SplitN(name, "_", 2)[0] // tolerate a _vX.Y.Z suffix
	address := "registry.terraform.io/hashicorp/" + name

	schemaPath := os.Getenv("SCHEMA_PROVIDER_JSON")
	if schemaPath == "" {
		return fmt.Errorf("set SCHEMA_PROVIDER_JSON to the output of `terraform providers schema -json`")
	}
	wanted := map[string]bool{}
	for _, typeName := range strings.Fields(strings.ReplaceAll(os.Getenv("SCHEMA_PROVIDER_TYPES"), ",", " ")) {
		wanted[typeName] = true
	}
	schemas, err := loadSchemas(schemaPath, address, wanted)
	if err != nil {
		return err
	}
	var stand *rehearsal
	if rehearsalEnabled() {
		stand = newRehearsal()
	}
	return tf5server.Serve(address, func() tfprotov5.ProviderServer { return &server{schemas: schemas, rehearsal: stand} })
}
