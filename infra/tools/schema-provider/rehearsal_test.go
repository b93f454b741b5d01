package main

import (
	"archive/zip"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// A cut-down google_cloudfunctions2_function: computed attributes at the top
// and in a nested list block.
var functionSchema = &tfprotov5.Schema{Block: &tfprotov5.SchemaBlock{
	Attributes: []*tfprotov5.SchemaAttribute{
		{Name: "name", Type: tftypes.String, Required: true},
		{Name: "project", Type: tftypes.String, Optional: true, Computed: true},
		{Name: "location", Type: tftypes.String, Required: true},
		{Name: "id", Type: tftypes.String, Optional: true, Computed: true},
		{Name: "url", Type: tftypes.String, Computed: true},
		{Name: "state", Type: tftypes.String, Computed: true},
	},
	BlockTypes: []*tfprotov5.SchemaNestedBlock{{
		TypeName: "service_config", Nesting: tfprotov5.SchemaNestedBlockNestingModeList,
		Block: &tfprotov5.SchemaBlock{Attributes: []*tfprotov5.SchemaAttribute{
			{Name: "max_instance_count", Type: tftypes.Number, Optional: true, Computed: true},
			{Name: "uri", Type: tftypes.String, Computed: true},
			{Name: "service", Type: tftypes.String, Optional: true, Computed: true},
			{Name: "environment_variables", Type: tftypes.Map{ElementType: tftypes.String}, Optional: true},
		}},
	}},
}}

func proposedFunction(t *testing.T) tftypes.Value {
	t.Helper()
	typ := functionSchema.ValueType().(tftypes.Object)
	serviceType := typ.AttributeTypes["service_config"].(tftypes.List).ElementType.(tftypes.Object)
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	null := func(ty tftypes.Type) tftypes.Value { return tftypes.NewValue(ty, nil) }
	service := tftypes.NewValue(serviceType, map[string]tftypes.Value{
		"max_instance_count":    tftypes.NewValue(tftypes.Number, 2),
		"uri":                   null(tftypes.String),
		"service":               null(tftypes.String),
		"environment_variables": tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, map[string]tftypes.Value{"A": str("1")}),
	})
	return tftypes.NewValue(typ, map[string]tftypes.Value{
		"name": str("app"), "project": str("p1"), "location": str("us-central1"),
		"id": null(tftypes.String), "url": null(tftypes.String), "state": null(tftypes.String),
		"service_config": tftypes.NewValue(typ.AttributeTypes["service_config"], []tftypes.Value{service}),
	})
}

func dynamic(t *testing.T, v tftypes.Value) *tfprotov5.DynamicValue {
	t.Helper()
	d, err := tfprotov5.NewDynamicValue(functionSchema.ValueType(), v)
	if err != nil {
		t.Fatal(err)
	}
	return &d
}

func at(t *testing.T, v tftypes.Value, path *tftypes.AttributePath) tftypes.Value {
	t.Helper()
	got, _, err := tftypes.WalkAttributePath(v, path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return got.(tftypes.Value)
}

func TestPlanMarksComputedNullsUnknownAndApplyFillsThem(t *testing.T) {
	r := &rehearsal{projectNumber: "123456789012"}
	plan, err := r.plan(functionSchema, &tfprotov5.PlanResourceChangeRequest{TypeName: "google_cloudfunctions2_function", ProposedNewState: dynamic(t, proposedFunction(t))})
	if err != nil || len(plan.Diagnostics) > 0 {
		t.Fatal(err, plan.Diagnostics)
	}
	planned, _ := plan.PlannedState.Unmarshal(functionSchema.ValueType())
	uri := tftypes.NewAttributePath().WithAttributeName("service_config").WithElementKeyInt(0).WithAttributeName("uri")
	for _, path := range []*tftypes.AttributePath{tftypes.NewAttributePath().WithAttributeName("url"), uri} {
		if at(t, planned, path).IsKnown() {
			t.Errorf("%s should be unknown after the plan", path)
		}
	}
	if env := at(t, planned, uri.WithoutLastStep().WithAttributeName("environment_variables")); !env.IsKnown() || env.IsNull() {
		t.Errorf("a configured attribute must keep its value, got %s", env)
	}

	applied, err := r.apply(functionSchema, &tfprotov5.ApplyResourceChangeRequest{TypeName: "google_cloudfunctions2_function", PlannedState: plan.PlannedState})
	if err != nil || len(applied.Diagnostics) > 0 {
		t.Fatal(err, applied.Diagnostics)
	}
	state, _ := applied.NewState.Unmarshal(functionSchema.ValueType())
	if !state.IsFullyKnown() {
		t.Fatal("the applied state must be wholly known")
	}
	want := map[*tftypes.AttributePath]string{
		tftypes.NewAttributePath().WithAttributeName("url"):   "https://us-central1-p1.cloudfunctions.net/app",
		tftypes.NewAttributePath().WithAttributeName("id"):    "projects/p1/locations/us-central1/functions/app",
		tftypes.NewAttributePath().WithAttributeName("state"): "ACTIVE",
		uri: "https://app-123456789012.us-central1.run.app",
		uri.WithoutLastStep().WithAttributeName("service"): "projects/p1/locations/us-central1/services/app",
	}
	for path, expected := range want {
		var got string
		if err := at(t, state, path).As(&got); err != nil || got != expected {
			t.Errorf("%s = %q, want %q", path, got, expected)
		}
	}
}

func TestDestroyPassesNullThrough(t *testing.T) {
	r := &rehearsal{}
	null := dynamic(t, tftypes.NewValue(functionSchema.ValueType(), nil))
	applied, err := r.apply(functionSchema, &tfprotov5.ApplyResourceChangeRequest{TypeName: "google_cloudfunctions2_function", PlannedState: null})
	if err != nil {
		t.Fatal(err)
	}
	state, _ := applied.NewState.Unmarshal(functionSchema.ValueType())
	if !state.IsNull() {
		t.Errorf("a destroyed resource's new state is null, got %s", state)
	}
}

func TestExcludes(t *testing.T) {
	patterns := []string{"**/__pycache__", "**/*.pyc"}
	for path, excluded := range map[string]bool{
		"__pycache__": true, "a/b/__pycache__": true, "x.pyc": true, "a/x.pyc": true,
		"main.py": false, "templates/page.html": false, "pycache": false,
	} {
		if excludedBy(path, patterns) != excluded {
			t.Errorf("excludedBy(%q) = %v", path, !excluded)
		}
	}
}

func TestArchiveZipsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	source := filepath.Join(dir, "src")
	for name, content := range map[string]string{"main.py": "x", "sub/y.py": "y", "__pycache__/main.pyc": "c", "sub/z.pyc": "z"} {
		file := filepath.Join(source, name)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	output := filepath.Join(dir, "out", "f.zip")
	config := map[string]string{"type": "zip", "source_dir": source, "output_path": output}
	first, err := archive(config, []string{"**/__pycache__", "**/*.pyc"}, tftypes.NewValue(tftypes.Set{ElementType: tftypes.String}, nil))
	if err != nil {
		t.Fatal(err)
	}
	reader, err := zip.OpenReader(output)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var names []string
	for _, f := range reader.File {
		names = append(names, f.Name)
	}
	if len(names) != 2 || names[0] != "main.py" || names[1] != "sub/y.py" {
		t.Errorf("zipped %v", names)
	}
	second, _ := archive(config, []string{"**/__pycache__", "**/*.pyc"}, tftypes.NewValue(tftypes.Set{ElementType: tftypes.String}, nil))
	if first["output_md5"] != second["output_md5"] {
		t.Error("the same files must zip to the same bytes")
	}
}
