//! `gpufleet_virtual_cluster_connection` with the real Terraform CLI against the shared lab:
//! one apply creates a virtual cluster with the default `expose` (a ClusterIP Service, not
//! reachable from this machine), opens a connection to it, and `kubectl`, a client gpufleet
//! does not write, creates an object in the tenant from a `local-exec` provisioner fed by
//! the connection's ephemeral values. A second provisioner reads the object back through the
//! same connection. The state must hold no trace of the connection's token.

use gpufleet_acceptance::Session;
use gpufleet_lab::Lab;

/// The kubectl the provisioners run: the lab's own, built from the same Kubernetes release
/// as its control plane, so nothing installed on the machine takes part.
fn kubectl() -> String {
    Lab::shared()
        .kubectl()
        .expect("the lab's kubectl")
        .display()
        .to_string()
}

fn config(kubectl: &str) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    gpufleet = {{ source = "gpufleet/gpufleet" }}
  }}
}}

provider "gpufleet" {{}}

resource "gpufleet_virtual_cluster" "c" {{
  name = "acc-conn"
}}

ephemeral "gpufleet_virtual_cluster_connection" "c" {{
  virtual_cluster_id = gpufleet_virtual_cluster.c.id
  credentials_ttl    = "15m"
}}

locals {{
  # kubectl reads the kubeconfig from a file only this run uses; the token is kept beside it
  # so the test can look for it in the state.
  tenant = {{
    TENANT_KUBECONFIG = ephemeral.gpufleet_virtual_cluster_connection.c.kubeconfig
    TENANT_TOKEN      = ephemeral.gpufleet_virtual_cluster_connection.c.token
    KUBECTL           = "{kubectl}"
  }}
}}

resource "terraform_data" "create" {{
  triggers_replace = [gpufleet_virtual_cluster.c.id]

  provisioner "local-exec" {{
    interpreter = ["/bin/bash", "-c"]
    command     = <<-EOT
      set -euo pipefail
      printf '%s' "$TENANT_KUBECONFIG" > tenant.kubeconfig
      printf '%s' "$TENANT_TOKEN" > token.seen
      "$KUBECTL" --kubeconfig tenant.kubeconfig create configmap made-by-kubectl \
        --namespace default --from-literal=through=connection
      rm -f tenant.kubeconfig
    EOT
    environment = local.tenant
  }}
}}

resource "terraform_data" "read_back" {{
  triggers_replace = [terraform_data.create.id]

  provisioner "local-exec" {{
    interpreter = ["/bin/bash", "-c"]
    command     = <<-EOT
      set -euo pipefail
      printf '%s' "$TENANT_KUBECONFIG" > tenant.kubeconfig
      "$KUBECTL" --kubeconfig tenant.kubeconfig get configmap made-by-kubectl \
        --namespace default -o 'jsonpath={{.data.through}}' > configmap.seen
      rm -f tenant.kubeconfig
    EOT
    environment = local.tenant
  }}
}}
"#
    )
}

#[test]
fn kubectl_reaches_a_default_tenant_through_the_connection_and_the_state_keeps_no_token() {
    let s = Session::new(&config(&kubectl()), Lab::shared().settings_env());
    let _cleanup = s.destroy_on_panic();
    s.apply();

    // The object exists in the tenant, read back by kubectl through the connection.
    assert_eq!(s.wd.read("configmap.seen"), "connection");

    // The token worked, and is nowhere in the state.
    let token = s.wd.read("token.seen");
    assert!(token.len() > 20, "a real token was handed to kubectl");
    let state = s.wd.read("terraform.tfstate");
    assert!(
        !state.contains(token.trim()),
        "the connection's token is in the state"
    );
    // (Resources that used it may still name it among their dependencies.)
    let parsed: serde_json::Value = serde_json::from_str(&state).expect("the state is JSON");
    let types: Vec<&str> = parsed["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["type"].as_str())
        .collect();
    assert!(
        !types.contains(&"gpufleet_virtual_cluster_connection"),
        "the connection is not a resource in the state: {types:?}"
    );
    // The plan does not hold it either: the next plan has nothing to do, although it opens
    // the connection again.
    s.assert_plan_empty();

    // The `connect` example, as written, reaches the same tenant from a configuration of its
    // own (the way a team reaches tenants another workspace created).
    let mut env = Lab::shared().settings_env();
    env.push((
        "TF_VAR_virtual_cluster_id".into(),
        "vc-acc-conn/acc-conn".into(),
    ));
    env.push(("TF_VAR_kubectl".into(), kubectl()));
    let connect = Session::new(&gpufleet_acceptance::example("connect"), env);
    let applied = connect.apply();
    assert!(
        applied.contains("terraform_data.tenant_nodes: Creation complete"),
        "kubectl listed the tenant's nodes through the connection:\n{applied}"
    );
    assert!(
        connect.wd.path().join("tenant-nodes.txt").is_file(),
        "the example writes kubectl's list"
    );
    connect.destroy();

    s.destroy();
    assert!(s.addresses().is_empty(), "{:?}", s.addresses());
}
