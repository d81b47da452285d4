//! Smoke test of the acceptance harness itself: drives the real Terraform CLI through a full
//! init / plan / apply / re-plan / destroy cycle on a configuration that uses only Terraform's
//! built-in `terraform_data` resource, so it needs no gpufleet provider.

use gpufleet_acceptance::Workdir;

const CONFIG: &str = r#"
variable "greeting" {
  type    = string
  default = "hello"
}

resource "terraform_data" "example" {
  input = var.greeting
}

output "greeting" {
  value = terraform_data.example.output
}
"#;

#[test]
fn terraform_data_lifecycle_through_the_real_cli() {
    let wd = Workdir::without_provider(CONFIG);

    wd.init();
    assert!(
        wd.state_list().is_empty(),
        "no state before the first apply"
    );

    let validate = wd.validate_json();
    assert_eq!(validate["valid"], true, "{validate:#}");
    assert!(wd.validate_diagnostics().is_empty());

    let plan = wd.plan();
    assert!(
        plan.contains("Plan: 1 to add, 0 to change, 0 to destroy."),
        "{plan}"
    );

    let plan_json = wd.plan_json();
    assert_eq!(
        plan_json["resource_changes"][0]["change"]["actions"],
        serde_json::json!(["create"]),
        "{plan_json:#}"
    );

    wd.apply();
    assert_eq!(wd.state_list(), ["terraform_data.example"]);
    assert_eq!(wd.output_json()["greeting"]["value"], "hello");
    let state = wd.show_json();
    assert_eq!(
        state["values"]["root_module"]["resources"][0]["values"]["input"], "hello",
        "{state:#}"
    );
    wd.assert_plan_empty();

    // Changing the configuration makes the plan non-empty.
    wd.write("main.tf", &CONFIG.replace("\"hello\"", "\"bonjour\""));
    let replan = wd.run(&["plan", "-detailed-exitcode", "-input=false", "-no-color"]);
    assert_eq!(replan.status_code, 2, "{replan}");
    wd.apply();
    wd.assert_plan_empty();

    wd.destroy();
    assert!(wd.state_list().is_empty());
}

#[test]
fn failing_commands_report_their_exit_code_and_errors() {
    let wd =
        Workdir::without_provider("resource \"terraform_data\" \"broken\" {\n  input = nope\n}\n");
    wd.init();
    let out = wd.plan_expect_error();
    assert_eq!(out.status_code, 1, "{out}");
    assert!(out.contains("Invalid reference"), "{out}");

    let validate = wd.validate_json();
    assert_eq!(validate["valid"], false, "{validate:#}");
    assert_eq!(wd.validate_diagnostics().len(), 1, "{validate:#}");
}

#[test]
fn environment_is_controlled() {
    let wd = Workdir::without_provider(
        "variable \"v\" {\n  type = string\n}\noutput \"v\" {\n  value = var.v\n}\n",
    );
    wd.init();
    // Without a value, -input=false and TF_INPUT=0 make Terraform fail instead of prompting.
    let missing = wd.run(&["apply", "-auto-approve", "-no-color"]);
    assert_ne!(missing.status_code, 0, "{missing}");
    // Extra environment variables reach Terraform.
    wd.run_ok_with_env(
        &["apply", "-auto-approve", "-no-color"],
        &[("TF_VAR_v", "from-env")],
    );
    assert_eq!(wd.output_json()["v"]["value"], "from-env");
}
