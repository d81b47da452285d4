// Command terraform-provider-peer is a deliberately small Terraform provider
// built on terraform-plugin-framework. It exists only so scripts/bench can
// compare gpufleet's start-up and plan times against a typical Go provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func main() {
	// -debug is free with the framework, so keep it for parity with real providers.
	debug := flag.Bool("debug", false, "run with support for debuggers like delve")
	flag.Parse()

	err := providerserver.Serve(context.Background(), func() provider.Provider { return peerProvider{} },
		providerserver.ServeOpts{Address: "registry.terraform.io/gpufleet/peer", Debug: *debug})
	if err != nil {
		log.Fatal(err)
	}
}

// peerProvider has no configuration: the benchmark measures plumbing, not setup.
type peerProvider struct{}

func (peerProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "peer"
}

func (peerProvider) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}

func (peerProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (peerProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return gpuCatalog{} }}
}

func (peerProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return record{} }}
}

// gpuSpec is one catalog entry; a static map keeps Read free of I/O so the
// benchmark times only the framework and protocol overhead.
type gpuSpec struct {
	memoryGiB    int64
	migCapable   bool
	architecture string
}

var catalog = map[string]gpuSpec{
	"NVIDIA-H100-80GB-HBM3": {80, true, "hopper"},
	"NVIDIA-A100-SXM4-40GB": {40, true, "ampere"},
	"NVIDIA-L4":             {24, false, "ada-lovelace"},
	"Tesla-T4":              {16, false, "turing"},
}

type gpuCatalog struct{}

type gpuCatalogModel struct {
	Product      types.String `tfsdk:"product"`
	MemoryGiB    types.Int64  `tfsdk:"memory_gib"`
	MIGCapable   types.Bool   `tfsdk:"mig_capable"`
	Architecture types.String `tfsdk:"architecture"`
}

func (gpuCatalog) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_gpu_catalog"
}

func (gpuCatalog) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Looks up static facts about a GPU product.",
		Attributes: map[string]schema.Attribute{
			"product":      schema.StringAttribute{Required: true},
			"memory_gib":   schema.Int64Attribute{Computed: true},
			"mig_capable":  schema.BoolAttribute{Computed: true},
			"architecture": schema.StringAttribute{Computed: true},
		},
	}
}

func (gpuCatalog) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m gpuCatalogModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}

	spec, ok := catalog[m.Product.ValueString()]
	if !ok {
		resp.Diagnostics.AddAttributeError(path.Root("product"), "Unknown GPU product",
			"The catalog has no entry for "+m.Product.String()+".")
		return
	}

	m.MemoryGiB = types.Int64Value(spec.memoryGiB)
	m.MIGCapable = types.BoolValue(spec.migCapable)
	m.Architecture = types.StringValue(spec.architecture)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// record is a resource whose every operation is answered from the request alone: a no-op
// plan of many of them is what any framework provider pays before it does real work.
type record struct{}

type recordModel struct {
	ID   types.String `tfsdk:"id"`
	Name types.String `tfsdk:"name"`
}

func (record) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_record"
}

func (record) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = rschema.Schema{
		Description: "Keeps a name; reads and writes nothing else.",
		Attributes: map[string]rschema.Attribute{
			"id": rschema.StringAttribute{
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			// The id is the name, so a new name is a new record.
			"name": rschema.StringAttribute{
				Required:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
		},
	}
}

func (record) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	resp.Diagnostics.Append(keep(ctx, req.Plan, &resp.State)...)
}

func (record) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m recordModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (record) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.Append(keep(ctx, req.Plan, &resp.State)...)
}

// keep writes the planned name to state, with the name as its id.
func keep(ctx context.Context, plan tfsdk.Plan, state *tfsdk.State) diag.Diagnostics {
	var m recordModel
	diags := plan.Get(ctx, &m)
	m.ID = m.Name
	return append(diags, state.Set(ctx, &m)...)
}

func (record) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
