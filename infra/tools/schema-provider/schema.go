package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The shapes below follow `terraform providers schema -json` (format 1.0).
type schemaFile struct {
	ProviderSchemas map[string]providerJSON `json:"provider_schemas"`
}

type providerJSON struct {
	Provider          schemaJSON                 `json:"provider"`
	ResourceSchemas   map[string]json.RawMessage `json:"resource_schemas"`
	DataSourceSchemas map[string]json.RawMessage `json:"data_source_schemas"`
}

type schemaJSON struct {
	Version int64     `json:"version"`
	Block   blockJSON `json:"block"`
}

type blockJSON struct {
	Attributes  map[string]attributeJSON `json:"attributes"`
	BlockTypes  map[string]blockTypeJSON `json:"block_types"`
	Description string                   `json:"description"`
	Deprecated  bool                     `json:"deprecated"`
}

type attributeJSON struct {
	Type        json.RawMessage `json:"type"`
	NestedType  json.RawMessage `json:"nested_type"`
	Description string          `json:"description"`
	Required    bool            `json:"required"`
	Optional    bool            `json:"optional"`
	Computed    bool            `json:"computed"`
	Sensitive   bool            `json:"sensitive"`
	Deprecated  bool            `json:"deprecated"`
	WriteOnly   bool            `json:"write_only"`
}

type blockTypeJSON struct {
	NestingMode string    `json:"nesting_mode"`
	Block       blockJSON `json:"block"`
	MinItems    int64     `json:"min_items"`
	MaxItems    int64     `json:"max_items"`
}

var nestingModes = map[string]tfprotov5.SchemaNestedBlockNestingMode{
	"single": tfprotov5.SchemaNestedBlockNestingModeSingle,
	"list":   tfprotov5.SchemaNestedBlockNestingModeList,
	"set":    tfprotov5.SchemaNestedBlockNestingModeSet,
	"map":    tfprotov5.SchemaNestedBlockNestingModeMap,
	"group":  tfprotov5.SchemaNestedBlockNestingModeGroup,
}

// providerSchemas is one provider's schemas in protocol form.
type providerSchemas struct {
	provider    *tfprotov5.Schema
	resources   map[string]*tfprotov5.Schema
	dataSources map[string]*tfprotov5.Schema
}

// loadSchemas reads one provider's schemas from path. When wanted is not
// empty, only the resource and data source types named in it are served:
// Terraform then handles a few schemas instead of over a thousand.
func loadSchemas(path, address string, wanted map[string]bool) (*providerSchemas, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file schemaFile
	if err := json.Unmarshal(raw, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	found, ok := file.ProviderSchemas[address]
	if !ok {
		return nil, fmt.Errorf("%s has no schema for %s", path, address)
	}
	result := &providerSchemas{
		resources:   map[string]*tfprotov5.Schema{},
		dataSources: map[string]*tfprotov5.Schema{},
	}
	if result.provider, err = convertSchema(found.Provider); err != nil {
		return nil, fmt.Errorf("provider config: %w", err)
	}
	if err := convertWanted(found.ResourceSchemas, wanted, result.resources); err != nil {
		return nil, fmt.Errorf("resource %w", err)
	}
	if err := convertWanted(found.DataSourceSchemas, wanted, result.dataSources); err != nil {
		return nil, fmt.Errorf("data source %w", err)
	}
	return result, nil
}

func convertWanted(raw map[string]json.RawMessage, wanted map[string]bool, into map[string]*tfprotov5.Schema) error {
	for name, text := range raw {
		if len(wanted) > 0 && !wanted[name] {
			continue
		}
		var s schemaJSON
		if err := json.Unmarshal(text, &s); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		converted, err := convertSchema(s)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		into[name] = converted
	}
	return nil
}

func convertSchema(s schemaJSON) (*tfprotov5.Schema, error) {
	block, err := convertBlock(s.Block)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.Schema{Version: s.Version, Block: block}, nil
}

func convertBlock(b blockJSON) (*tfprotov5.SchemaBlock, error) {
	block := &tfprotov5.SchemaBlock{Description: b.Description, Deprecated: b.Deprecated}
	for name, a := range b.Attributes {
		if len(a.NestedType) > 0 {
			// Protocol 5, which the real google provider speaks, has no nested attributes.
			return nil, fmt.Errorf("attribute %s: nested attribute types need protocol 6", name)
		}
		typ, err := tftypes.ParseJSONType(a.Type) //nolint:staticcheck // the only parser of this format
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		block.Attributes = append(block.Attributes, &tfprotov5.SchemaAttribute{
			Name: name, Type: typ, Description: a.Description,
			Required: a.Required, Optional: a.Optional, Computed: a.Computed,
			Sensitive: a.Sensitive, Deprecated: a.Deprecated, WriteOnly: a.WriteOnly,
		})
	}
	for name, bt := range b.BlockTypes {
		nested, err := convertBlock(bt.Block)
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", name, err)
		}
		mode, ok := nestingModes[bt.NestingMode]
		if !ok {
			return nil, fmt.Errorf("block %s: unknown nesting mode %q", name, bt.NestingMode)
		}
		block.BlockTypes = append(block.BlockTypes, &tfprotov5.SchemaNestedBlock{
			TypeName: name, Block: nested, Nesting: mode,
			MinItems: bt.MinItems, MaxItems: bt.MaxItems,
		})
	}
	return block, nil
}
