//! A [`Workdir`] bound to the backend settings of a lab (or any environment), so tests run
//! Terraform against it without repeating the variables on every call.

use serde_json::Value;

use crate::{Output, Workdir};

/// A work directory whose commands all run with the same extra environment, typically
/// `Lab::settings_env()`.
#[derive(Debug)]
pub struct Session {
    /// The work directory.
    pub wd: Workdir,
    env: Vec<(String, String)>,
}

impl Session {
    /// Writes `main_tf`, runs `terraform init`, and keeps `env` for every later command.
    ///
    /// # Panics
    /// When init fails.
    pub fn new(main_tf: &str, env: Vec<(String, String)>) -> Session {
        let s = Self::in_workdir(Workdir::new(main_tf), env);
        s.ok(&["init", "-input=false", "-no-color"]);
        s
    }

    /// A session on `body` against the shared lab: the provider's `required_providers` and an
    /// empty provider block (its settings come from the lab's environment), then `body`.
    ///
    /// # Panics
    /// When init fails.
    pub fn on_shared_lab(body: &str) -> Session {
        let main_tf = format!(
            r#"
terraform {{
  required_providers {{
    gpufleet = {{ source = "gpufleet/gpufleet" }}
  }}
}}
provider "gpufleet" {{}}
{body}"#
        );
        Self::new(&main_tf, gpufleet_lab::Lab::shared().settings_env())
    }

    /// A session on a prepared work directory (another CLI through
    /// [`Workdir::with_launcher`], say), without `init`: with development overrides,
    /// OpenTofu and Terraform before 1.15 look the overridden provider up in the registry
    /// on init, and a configuration without modules needs no init.
    pub fn in_workdir(wd: Workdir, env: Vec<(String, String)>) -> Session {
        Session { wd, env }
    }

    /// The extra environment every command runs with.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Replaces `main.tf`.
    pub fn write(&self, main_tf: &str) {
        self.wd.write("main.tf", main_tf);
    }

    /// Starts `terraform ARGS` with the session's environment in the background (see
    /// [`Workdir::spawn`]).
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.wd.spawn(args, &self.env_pairs())
    }

    /// `terraform ARGS` with the session's environment, whatever its exit code.
    pub fn run(&self, args: &[&str]) -> Output {
        self.wd.run_with_env(args, &self.env_pairs())
    }

    fn env_pairs(&self) -> Vec<(&str, &str)> {
        self.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// `terraform ARGS`, which must succeed.
    ///
    /// # Panics
    /// When it fails, showing its output.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(out.success(), "terraform {args:?} failed:\n{out}");
        out
    }

    /// `terraform apply -auto-approve`, which must succeed.
    pub fn apply(&self) -> Output {
        self.ok(&["apply", "-auto-approve", "-input=false", "-no-color"])
    }

    /// `terraform destroy -auto-approve`, which must succeed.
    pub fn destroy(&self) -> Output {
        self.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"])
    }

    /// A guard that destroys what this session applied if the test panics before its own
    /// destroy, so one failed test does not leave objects that fail the next ones.
    pub fn destroy_on_panic(&self) -> DestroyOnPanic<'_> {
        DestroyOnPanic(self)
    }

    /// `terraform plan -detailed-exitcode`: exit code 0 is no change, 2 is changes, 1 errors.
    pub fn plan(&self) -> Output {
        self.run(&["plan", "-detailed-exitcode", "-input=false", "-no-color"])
    }

    /// Requires the plan to be empty.
    ///
    /// # Panics
    /// When the plan has changes or fails.
    pub fn assert_plan_empty(&self) {
        let out = self.plan();
        assert_eq!(out.status_code, 0, "expected an empty plan:\n{out}");
    }

    /// The attribute values of the resource at `address` (`module.x.type.name[key]` too), or
    /// null when the state has none.
    pub fn resource(&self, address: &str) -> Value {
        fn find(module: &Value, address: &str) -> Option<Value> {
            let own = module["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["address"] == address)
                .map(|r| r["values"].clone());
            own.or_else(|| {
                module["child_modules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find_map(|m| find(m, address))
            })
        }
        let show = self.ok(&["show", "-json", "-no-color"]).json();
        find(&show["values"]["root_module"], address).unwrap_or(Value::Null)
    }

    /// Every resource address in the state.
    pub fn addresses(&self) -> Vec<String> {
        self.wd.state_list()
    }

    /// `terraform output -raw NAME`.
    pub fn output_raw(&self, name: &str) -> String {
        self.ok(&["output", "-raw", "-no-color", name])
            .stdout
            .clone()
    }
}

/// See [`Session::destroy_on_panic`].
#[derive(Debug)]
pub struct DestroyOnPanic<'a>(&'a Session);

impl Drop for DestroyOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let env: Vec<(&str, &str)> = self
                .0
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let args = ["destroy", "-auto-approve", "-input=false", "-no-color"];
            let out = self.0.wd.execute(&args, &env);
            eprintln!(
                "[acceptance] destroy after the failure: exit {}",
                out.status_code
            );
        }
    }
}

/// The import example's round trip: its objects are built "by hand" (the example without its
/// import blocks, from a work directory whose state is then dropped), then the whole example
/// adopts them (3 to import, nothing else), plans empty and destroys. `session` makes a
/// session for a configuration, with whichever CLI the caller tests.
///
/// # Panics
/// When any step does something else.
pub fn assert_import_example_adopts(full: &str, session: impl Fn(&str) -> Session) {
    let resources = crate::without_import_blocks(full);
    assert!(!resources.contains("import {"));
    session(&resources).apply();

    let s = session(full);
    let plan = s.ok(&["plan", "-input=false", "-no-color"]);
    assert!(
        plan.contains("3 to import, 0 to add, 0 to change, 0 to destroy"),
        "{plan}"
    );
    let applied = s.apply();
    assert!(
        applied.contains("3 imported, 0 added, 0 changed, 0 destroyed"),
        "{applied}"
    );
    s.assert_plan_empty();
    s.destroy();
}
