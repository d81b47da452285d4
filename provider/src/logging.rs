//! Logs on stderr as hclog JSON lines, which go-plugin parses so that Terraform shows them
//! under `TF_LOG_PROVIDER` with their level and fields.
//!
//! The level comes from `TF_LOG_PROVIDER_GPUFLEET`, `TF_LOG_PROVIDER` or `TF_LOG`, the
//! variables Terraform users already set. Values are never logged, only names and counts, so
//! no secret reaches a log.

use std::{fmt::Write as _, io::Write as _};

use tracing::{
    Event, Level, Subscriber,
    field::{Field, Visit},
};
use tracing_subscriber::{
    Layer,
    filter::{LevelFilter, Targets},
    layer::Context,
    prelude::*,
};

/// The level chosen by the environment.
pub fn level_from_env(env: &dyn Fn(&str) -> Option<String>) -> LevelFilter {
    let raw = ["TF_LOG_PROVIDER_GPUFLEET", "TF_LOG_PROVIDER", "TF_LOG"]
        .iter()
        .find_map(|k| env(k).filter(|v| !v.is_empty()));
    match raw.map(|v| v.to_ascii_lowercase()).as_deref() {
        Some("trace" | "json") => LevelFilter::TRACE,
        Some("debug") => LevelFilter::DEBUG,
        Some("info") => LevelFilter::INFO,
        Some("error") => LevelFilter::ERROR,
        Some("off") => LevelFilter::OFF,
        _ => LevelFilter::WARN,
    }
}

/// Installs the hclog JSON logger on stderr.
pub fn init(level: LevelFilter) {
    // Dependencies (h2, rustls) are chatty at debug; their warnings are all a user needs.
    let filter = Targets::new()
        .with_target("terraform_provider_gpufleet", level)
        .with_target("gpufleet_engine", level)
        // The engine's resources log under `gpufleet::<resource>`, which names them for users.
        .with_target("gpufleet", level)
        .with_default(level.min(LevelFilter::WARN));
    let _ = tracing_subscriber::registry()
        .with(HclogJson.with_filter(filter))
        .try_init();
}

/// A layer that writes each event as one hclog JSON line.
struct HclogJson;

impl<S: Subscriber> Layer<S> for HclogJson {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let line = render(event);
        // One write per line so concurrent events never interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

fn render(event: &Event<'_>) -> String {
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut obj = serde_json::Map::new();
    obj.insert(
        "@level".into(),
        hclog_level(*event.metadata().level()).into(),
    );
    obj.insert("@message".into(), fields.message.into());
    obj.insert("@module".into(), "provider.gpufleet".into());
    obj.insert(
        "@timestamp".into(),
        humantime::format_rfc3339_micros(std::time::SystemTime::now())
            .to_string()
            .into(),
    );
    for (k, v) in fields.rest {
        obj.insert(k, v);
    }
    let mut line = serde_json::Value::Object(obj).to_string();
    line.push('\n');
    line
}

fn hclog_level(l: Level) -> &'static str {
    match l {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(String, serde_json::Value)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut s = String::new();
        let _ = write!(s, "{value:?}");
        if field.name() == "message" {
            self.message = s;
        } else {
            self.rest.push((field.name().to_owned(), s.into()));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.rest.push((field.name().to_owned(), value.into()));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.rest.push((field.name().to_owned(), value.into()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.rest.push((field.name().to_owned(), value.into()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.rest.push((field.name().to_owned(), value.into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_precedence() {
        let env = |k: &str| match k {
            "TF_LOG" => Some("trace".to_owned()),
            "TF_LOG_PROVIDER" => Some("info".to_owned()),
            _ => None,
        };
        assert_eq!(level_from_env(&env), LevelFilter::INFO);
        assert_eq!(level_from_env(&|_| None), LevelFilter::WARN);
    }
}
