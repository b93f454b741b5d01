package main

import (
	"context"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// server answers schema and validation requests from the real schema, and
// refuses anything that would need the real cloud, unless rehearsal is set
// (SCHEMA_PROVIDER_REHEARSAL=1): then rehearsal.go stands in for the cloud.
type server struct {
	schemas   *providerSchemas
	rehearsal *rehearsal // nil: schema-only, as for validate and terraform test
}

func offlineError(what string) []*tfprotov5.Diagnostic {
	return []*tfprotov5.Diagnostic{{
		Severity: tfprotov5.DiagnosticSeverityError,
		Summary:  "schema-only stand-in provider",
		Detail:   what + " needs the real provider; this stand-in only serves its schema for offline checks.",
	}}
}

func (s *server) GetMetadata(context.Context, *tfprotov5.GetMetadataRequest) (*tfprotov5.GetMetadataResponse, error) {
	resp := &tfprotov5.GetMetadataResponse{ServerCapabilities: &tfprotov5.ServerCapabilities{PlanDestroy: true}}
	for name := range s.schemas.resources {
		resp.Resources = append(resp.Resources, tfprotov5.ResourceMetadata{TypeName: name})
	}
	for name := range s.schemas.dataSources {
		resp.DataSources = append(resp.DataSources, tfprotov5.DataSourceMetadata{TypeName: name})
	}
	return resp, nil
}

func (s *server) GetProviderSchema(context.Context, *tfprotov5.GetProviderSchemaRequest) (*tfprotov5.GetProviderSchemaResponse, error) {
	return &tfprotov5.GetProviderSchemaResponse{
		ServerCapabilities: &tfprotov5.ServerCapabilities{PlanDestroy: true},
		Provider:           s.schemas.provider,
		ResourceSchemas:    s.schemas.resources,
		DataSourceSchemas:  s.schemas.dataSources,
	}, nil
}

func (s *server) GetResourceIdentitySchemas(context.Context, *tfprotov5.GetResourceIdentitySchemasRequest) (*tfprotov5.GetResourceIdentitySchemasResponse, error) {
	return &tfprotov5.GetResourceIdentitySchemasResponse{}, nil
}

func (s *server) PrepareProviderConfig(_ context.Context, req *tfprotov5.PrepareProviderConfigRequest) (*tfprotov5.PrepareProviderConfigResponse, error) {
	return &tfprotov5.PrepareProviderConfigResponse{PreparedConfig: req.Config}, nil
}

func (s *server) ConfigureProvider(_ context.Context, req *tfprotov5.ConfigureProviderRequest) (*tfprotov5.ConfigureProviderResponse, error) {
	if s.rehearsal != nil {
		return s.rehearsal.configure(s.schemas.provider, req)
	}
	return &tfprotov5.ConfigureProviderResponse{}, nil
}

func (s *server) StopProvider(context.Context, *tfprotov5.StopProviderRequest) (*tfprotov5.StopProviderResponse, error) {
	return &tfprotov5.StopProviderResponse{}, nil
}

// Terraform itself checks the configuration against the schema; the real
// provider's extra checks (e.g. allowed enum values) are not reproduced.
func (s *server) ValidateResourceTypeConfig(context.Context, *tfprotov5.ValidateResourceTypeConfigRequest) (*tfprotov5.ValidateResourceTypeConfigResponse, error) {
	return &tfprotov5.ValidateResourceTypeConfigResponse{}, nil
}

func (s *server) ValidateDataSourceConfig(context.Context, *tfprotov5.ValidateDataSourceConfigRequest) (*tfprotov5.ValidateDataSourceConfigResponse, error) {
	return &tfprotov5.ValidateDataSourceConfigResponse{}, nil
}

func (s *server) UpgradeResourceState(_ context.Context, req *tfprotov5.UpgradeResourceStateRequest) (*tfprotov5.UpgradeResourceStateResponse, error) {
	schema, ok := s.schemas.resources[req.TypeName]
	if !ok || req.RawState == nil {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: offlineError("upgrading state of " + req.TypeName)}, nil
	}
	typ := schema.ValueType()
	value, err := req.RawState.UnmarshalWithOpts(typ, tfprotov5.UnmarshalOpts{ValueFromJSONOpts: tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true}})
	if err != nil {
		return nil, err
	}
	state, err := tfprotov5.NewDynamicValue(typ, value)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.UpgradeResourceStateResponse{UpgradedState: &state}, nil
}

func (s *server) UpgradeResourceIdentity(context.Context, *tfprotov5.UpgradeResourceIdentityRequest) (*tfprotov5.UpgradeResourceIdentityResponse, error) {
	return &tfprotov5.UpgradeResourceIdentityResponse{Diagnostics: offlineError("resource identity")}, nil
}

func (s *server) ReadResource(_ context.Context, req *tfprotov5.ReadResourceRequest) (*tfprotov5.ReadResourceResponse, error) {
	if s.rehearsal != nil { // a refresh finds everything as the last apply left it
		return &tfprotov5.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}, nil
	}
	return &tfprotov5.ReadResourceResponse{Diagnostics: offlineError("reading " + req.TypeName)}, nil
}

// PlanResourceChange passes the proposed state through: enough for validate;
// terraform test replaces this provider with mock_provider for plans. The
// rehearsal plans as a provider does: what Google computes is unknown until applied.
func (s *server) PlanResourceChange(_ context.Context, req *tfprotov5.PlanResourceChangeRequest) (*tfprotov5.PlanResourceChangeResponse, error) {
	if s.rehearsal != nil {
		return s.rehearsal.plan(s.schemas.resources[req.TypeName], req)
	}
	return &tfprotov5.PlanResourceChangeResponse{PlannedState: req.ProposedNewState}, nil
}

func (s *server) ApplyResourceChange(_ context.Context, req *tfprotov5.ApplyResourceChangeRequest) (*tfprotov5.ApplyResourceChangeResponse, error) {
	if s.rehearsal != nil {
		return s.rehearsal.apply(s.schemas.resources[req.TypeName], req)
	}
	return &tfprotov5.ApplyResourceChangeResponse{Diagnostics: offlineError("applying " + req.TypeName)}, nil
}

func (s *server) ImportResourceState(_ context.Context, req *tfprotov5.ImportResourceStateRequest) (*tfprotov5.ImportResourceStateResponse, error) {
	return &tfprotov5.ImportResourceStateResponse{Diagnostics: offlineError("importing " + req.TypeName)}, nil
}

func (s *server) MoveResourceState(_ context.Context, req *tfprotov5.MoveResourceStateRequest) (*tfprotov5.MoveResourceStateResponse, error) {
	return &tfprotov5.MoveResourceStateResponse{Diagnostics: offlineError("moving " + req.TargetTypeName)}, nil
}

func (s *server) ReadDataSource(_ context.Context, req *tfprotov5.ReadDataSourceRequest) (*tfprotov5.ReadDataSourceResponse, error) {
	if s.rehearsal != nil && rehearsedDataSources[req.TypeName] {
		return s.rehearsal.readDataSource(s.schemas.dataSources[req.TypeName], req)
	}
	return &tfprotov5.ReadDataSourceResponse{Diagnostics: offlineError("reading data source " + req.TypeName)}, nil
}

func (s *server) GetFunctions(context.Context, *tfprotov5.GetFunctionsRequest) (*tfprotov5.GetFunctionsResponse, error) {
	return &tfprotov5.GetFunctionsResponse{Functions: map[string]*tfprotov5.Function{}}, nil
}

func (s *server) CallFunction(context.Context, *tfprotov5.CallFunctionRequest) (*tfprotov5.CallFunctionResponse, error) {
	return &tfprotov5.CallFunctionResponse{Error: &tfprotov5.FunctionError{Text: "provider functions are not served by the schema-only stand-in"}}, nil
}

func (s *server) ValidateEphemeralResourceConfig(context.Context, *tfprotov5.ValidateEphemeralResourceConfigRequest) (*tfprotov5.ValidateEphemeralResourceConfigResponse, error) {
	return &tfprotov5.ValidateEphemeralResourceConfigResponse{}, nil
}

func (s *server) OpenEphemeralResource(_ context.Context, req *tfprotov5.OpenEphemeralResourceRequest) (*tfprotov5.OpenEphemeralResourceResponse, error) {
	return &tfprotov5.OpenEphemeralResourceResponse{Diagnostics: offlineError("opening " + req.TypeName)}, nil
}

func (s *server) RenewEphemeralResource(context.Context, *tfprotov5.RenewEphemeralResourceRequest) (*tfprotov5.RenewEphemeralResourceResponse, error) {
	return &tfprotov5.RenewEphemeralResourceResponse{}, nil
}

func (s *server) CloseEphemeralResource(context.Context, *tfprotov5.CloseEphemeralResourceRequest) (*tfprotov5.CloseEphemeralResourceResponse, error) {
	return &tfprotov5.CloseEphemeralResourceResponse{}, nil
}
