package main

// The rehearsal mode (SCHEMA_PROVIDER_REHEARSAL=1): Terraform plans, applies,
// refreshes, reads outputs and destroys for real, against this stand-in for
// Google's control plane.
//
//   - PlanResourceChange: every computed attribute (nested blocks included)
//     that is null in the proposed state becomes unknown, as a provider plans
//     what Google computes; a prior value stays (Terraform's proposed state
//     already carries it); a destroy's null passes through.
//   - ApplyResourceChange: the planned state with every unknown filled, in the
//     shape Google gives it where it is known (values.go), a plain stand-in
//     value otherwise; known planned values are never changed (Terraform
//     refuses an apply that changes them).
//   - ReadResource returns the state as it is; ReadDataSource answers the root
//     module's two data sources (data.go); anything else is refused as before.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

const (
	rehearsalEnv      = "SCHEMA_PROVIDER_REHEARSAL"
	projectNumberEnv  = "SCHEMA_PROVIDER_PROJECT_NUMBER"
	defaultProjectNum = "123456789012"
)

func rehearsalEnabled() bool {
	switch strings.ToLower(os.Getenv(rehearsalEnv)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// rehearsal keeps what the provider block configured: the project and region a
// resource without its own falls back on, as the real provider does.
type rehearsal struct {
	mu            sync.Mutex
	project       string
	region        string
	projectNumber string
}

func newRehearsal() *rehearsal {
	number := os.Getenv(projectNumberEnv)
	if number == "" {
		number = defaultProjectNum
	}
	return &rehearsal{projectNumber: number}
}

func rehearsalError(summary, detail string) []*tfprotov5.Diagnostic {
	return []*tfprotov5.Diagnostic{{Severity: tfprotov5.DiagnosticSeverityError, Summary: summary, Detail: detail}}
}

func (r *rehearsal) configure(schema *tfprotov5.Schema, req *tfprotov5.ConfigureProviderRequest) (*tfprotov5.ConfigureProviderResponse, error) {
	if req.Config == nil || schema == nil {
		return &tfprotov5.ConfigureProviderResponse{}, nil
	}
	config, err := req.Config.Unmarshal(schema.ValueType())
	if err != nil {
		return nil, err
	}
	attributes := topLevel(config)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.project, r.region = attributes["project"], attributes["region"]
	return &tfprotov5.ConfigureProviderResponse{}, nil
}

func (r *rehearsal) defaults() (project, region string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.project, r.region
}

func (r *rehearsal) plan(schema *tfprotov5.Schema, req *tfprotov5.PlanResourceChangeRequest) (*tfprotov5.PlanResourceChangeResponse, error) {
	if schema == nil {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: rehearsalError("unknown resource type", req.TypeName+" is not served by this stand-in")}, nil
	}
	typ := schema.ValueType()
	proposed, err := req.ProposedNewState.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	if proposed.IsNull() { // destroy
		return &tfprotov5.PlanResourceChangeResponse{PlannedState: req.ProposedNewState, PlannedPrivate: req.PriorPrivate}, nil
	}
	planned, err := markComputedUnknown(schema.Block, proposed)
	if err != nil {
		return nil, err
	}
	state, err := tfprotov5.NewDynamicValue(typ, planned)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.PlanResourceChangeResponse{PlannedState: &state, PlannedPrivate: req.PriorPrivate}, nil
}

// markComputedUnknown turns every computed attribute that is null in value into
// an unknown one. On an update the proposed state already holds the prior
// value of a computed attribute the configuration leaves out, so only new
// nested elements' attributes become unknown then.
func markComputedUnknown(block *tfprotov5.SchemaBlock, value tftypes.Value) (tftypes.Value, error) {
	return tftypes.Transform(value, func(path *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if !v.IsNull() {
			return v, nil
		}
		if attribute := attributeAt(block, path); attribute != nil && attribute.Computed {
			return tftypes.NewValue(v.Type(), tftypes.UnknownValue), nil
		}
		return v, nil
	})
}

// attributeAt is the schema attribute whose value is exactly at path, nil if
// path is a block, an element, or somewhere inside an attribute's value.
func attributeAt(block *tfprotov5.SchemaBlock, path *tftypes.AttributePath) *tfprotov5.SchemaAttribute {
	steps := path.Steps()
	for i := 0; i < len(steps); i++ {
		name, ok := steps[i].(tftypes.AttributeName)
		if !ok {
			return nil
		}
		for _, attribute := range block.Attributes {
			if attribute.Name == string(name) {
				if i == len(steps)-1 {
					return attribute
				}
				return nil
			}
		}
		var nested *tfprotov5.SchemaNestedBlock
		for _, candidate := range block.BlockTypes {
			if candidate.TypeName == string(name) {
				nested = candidate
				break
			}
		}
		if nested == nil {
			return nil
		}
		block = nested.Block
		switch nested.Nesting {
		case tfprotov5.SchemaNestedBlockNestingModeSingle, tfprotov5.SchemaNestedBlockNestingModeGroup:
			// the block's object itself, no element step
		default: // list, set, map: an element step comes next
			i++
			if i >= len(steps) {
				return nil
			}
		}
	}
	return nil
}

func (r *rehearsal) apply(schema *tfprotov5.Schema, req *tfprotov5.ApplyResourceChangeRequest) (*tfprotov5.ApplyResourceChangeResponse, error) {
	if schema == nil {
		return &tfprotov5.ApplyResourceChangeResponse{Diagnostics: rehearsalError("unknown resource type", req.TypeName+" is not served by this stand-in")}, nil
	}
	typ := schema.ValueType()
	planned, err := req.PlannedState.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	if planned.IsNull() { // destroyed: Google forgets it
		state, err := tfprotov5.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
		if err != nil {
			return nil, err
		}
		return &tfprotov5.ApplyResourceChangeResponse{NewState: &state}, nil
	}
	project, region := r.defaults()
	res := newResource(req.TypeName, planned, project, region, r.projectNumber)
	applied, err := tftypes.Transform(planned, func(path *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if v.IsKnown() {
			return v, nil
		}
		return res.fill(path, v.Type())
	})
	if err != nil {
		return nil, err
	}
	state, err := tfprotov5.NewDynamicValue(typ, applied)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.ApplyResourceChangeResponse{NewState: &state, Private: req.PlannedPrivate}, nil
}

// topLevel is value's known top-level string attributes.
func topLevel(value tftypes.Value) map[string]string {
	result := map[string]string{}
	if value.IsNull() || !value.IsKnown() {
		return result
	}
	var attributes map[string]tftypes.Value
	if err := value.As(&attributes); err != nil {
		return result
	}
	for name, attribute := range attributes {
		if !attribute.Type().Is(tftypes.String) || attribute.IsNull() || !attribute.IsKnown() {
			continue
		}
		var text string
		if attribute.As(&text) == nil {
			result[name] = text
		}
	}
	return result
}

// pathString renders path as service_config.0.uri (a set element as *).
func pathString(path *tftypes.AttributePath) string {
	parts := make([]string, 0, len(path.Steps()))
	for _, step := range path.Steps() {
		switch s := step.(type) {
		case tftypes.AttributeName:
			parts = append(parts, string(s))
		case tftypes.ElementKeyInt:
			parts = append(parts, strconv.FormatInt(int64(s), 10))
		case tftypes.ElementKeyString:
			parts = append(parts, string(s))
		default:
			parts = append(parts, "*")
		}
	}
	return strings.Join(parts, ".")
}

// lastName is the last attribute name in path ("" if none).
func lastName(path *tftypes.AttributePath) string {
	steps := path.Steps()
	for i := len(steps) - 1; i >= 0; i-- {
		if name, ok := steps[i].(tftypes.AttributeName); ok {
			return string(name)
		}
	}
	return ""
}

// standIn is a plain value of typ for an attribute nothing more is known of:
// "rehearsal-PATH", 0, false, an empty collection, an object of nulls.
func standIn(path *tftypes.AttributePath, typ tftypes.Type) (tftypes.Value, error) {
	switch {
	case typ.Is(tftypes.String):
		return tftypes.NewValue(typ, "rehearsal-"+pathString(path)), nil
	case typ.Is(tftypes.Number):
		return tftypes.NewValue(typ, 0), nil
	case typ.Is(tftypes.Bool):
		return tftypes.NewValue(typ, false), nil
	case typ.Is(tftypes.List{}), typ.Is(tftypes.Set{}):
		return tftypes.NewValue(typ, []tftypes.Value{}), nil
	case typ.Is(tftypes.Map{}):
		return tftypes.NewValue(typ, map[string]tftypes.Value{}), nil
	case typ.Is(tftypes.Object{}):
		object := typ.(tftypes.Object)
		attributes := make(map[string]tftypes.Value, len(object.AttributeTypes))
		for name, attributeType := range object.AttributeTypes {
			attributes[name] = tftypes.NewValue(attributeType, nil)
		}
		return tftypes.NewValue(typ, attributes), nil
	case typ.Is(tftypes.Tuple{}):
		tuple := typ.(tftypes.Tuple)
		elements := make([]tftypes.Value, 0, len(tuple.ElementTypes))
		for i, elementType := range tuple.ElementTypes {
			element, err := standIn(path.WithElementKeyInt(i), elementType)
			if err != nil {
				return tftypes.Value{}, err
			}
			elements = append(elements, element)
		}
		return tftypes.NewValue(typ, elements), nil
	case typ.Is(tftypes.DynamicPseudoType):
		return tftypes.NewValue(tftypes.String, "rehearsal-"+pathString(path)), nil
	}
	return tftypes.Value{}, fmt.Errorf("%s: no stand-in value for type %s", pathString(path), typ)
}
