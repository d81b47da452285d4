//! The attributes a refresh reflects as users see them, rather than reporting them as drift:
//! the quota, the limit range and `expose`.

use serde_json::Value as Json;

use crate::resources::virtual_cluster::{
    config::{ExposeConfig, LimitRangeConfig, QuotaConfig},
    expose::Expose,
    quantity,
    schema::{
        DEFAULT_CPU, DEFAULT_MEMORY, DEFAULT_REQUEST_CPU, DEFAULT_REQUEST_MEMORY, QUOTA_CPU,
        QUOTA_GPUS, QUOTA_MEMORY, QUOTA_PODS, expose_value,
    },
};
use crate::{
    backends::kube::json::str_at,
    value::{Known, Value},
};

/// A quantity as observed, kept in the prior spelling when it is the same amount.
fn quantity_value(observed: Option<&str>, prior: &Known<String>) -> Value {
    match (observed, prior.value().map(String::as_str)) {
        (Some(o), Some(p)) if quantity::same(o, p) => Value::string(p),
        (Some(o), _) => Value::string(o),
        (None, _) => Value::Null,
    }
}

fn count_value(observed: Option<&str>) -> Value {
    observed
        .and_then(|s| quantity::parse(s).ok())
        .and_then(|n| {
            use bigdecimal::ToPrimitive;
            n.is_integer().then(|| n.to_i64()).flatten()
        })
        .map_or(Value::Null, Value::int)
}

pub(super) fn quota_value(rq: Option<&Json>, prior: Option<&QuotaConfig>) -> Value {
    let Some(rq) = rq else { return Value::Null };
    let none = QuotaConfig::default();
    let prior = prior.unwrap_or(&none);
    let hard = |k: &str| str_at(rq, &format!("/spec/hard/{}", k.replace('/', "~1")));
    Value::object([
        (QUOTA_GPUS, count_value(hard("requests.nvidia.com/gpu"))),
        (QUOTA_CPU, quantity_value(hard("requests.cpu"), &prior.cpu)),
        (
            QUOTA_MEMORY,
            quantity_value(hard("requests.memory"), &prior.memory),
        ),
        (QUOTA_PODS, count_value(hard("count/pods"))),
    ])
}

pub(super) fn limit_range_value(lr: Option<&Json>, prior: Option<&LimitRangeConfig>) -> Value {
    let Some(lr) = lr else { return Value::Null };
    let none = LimitRangeConfig::default();
    let prior = prior.unwrap_or(&none);
    let container = lr
        .pointer("/spec/limits")
        .and_then(Json::as_array)
        .and_then(|ls| ls.iter().find(|l| l["type"] == "Container"));
    let at = |ptr: &str| container.and_then(|c| str_at(c, ptr));
    // The API server fills a missing default request with the default limit
    // (`SetDefaults_LimitRangeItem`), so a request equal to the limit is what an unset
    // attribute reads back as, unless the configuration named it.
    let request = |resource: &str, prior: &Known<String>| {
        let observed = at(&format!("/defaultRequest/{resource}"));
        let limit = at(&format!("/default/{resource}"));
        match (observed, limit) {
            (Some(o), Some(l)) if prior.is_null() && quantity::same(o, l) => Value::Null,
            _ => quantity_value(observed, prior),
        }
    };
    Value::object([
        (
            DEFAULT_CPU,
            quantity_value(at("/default/cpu"), &prior.default_cpu),
        ),
        (
            DEFAULT_MEMORY,
            quantity_value(at("/default/memory"), &prior.default_memory),
        ),
        (
            DEFAULT_REQUEST_CPU,
            request("cpu", &prior.default_request_cpu),
        ),
        (
            DEFAULT_REQUEST_MEMORY,
            request("memory", &prior.default_request_memory),
        ),
    ])
}

/// `expose` as observed: the Service's type, reflected as users see it; the host from the
/// stored vcluster.yaml on import (a refresh keeps the configured one, and a stored
/// configuration edited out of band shows in `drift`). `None` keeps a prior value that
/// means the same as it is.
pub(super) fn reflected_expose(
    prior: &Known<ExposeConfig>,
    seen: &Expose,
    importing: bool,
) -> Option<Value> {
    if importing {
        return Some(expose_value(seen));
    }
    let was = match prior {
        Known::Null => return Some(expose_value(seen)),
        Known::Unknown => Expose::default(),
        Known::Value(e) => e.or_defaults(),
    };
    let now = Expose {
        service_type: seen.service_type,
        host: was.host.clone(),
    };
    (now != was).then(|| expose_value(&now))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit_range(default_cpu: &str, request_cpu: &str) -> Json {
        serde_json::json!({ "spec": { "limits": [{
            "type": "Container",
            "default": { "cpu": default_cpu },
            "defaultRequest": { "cpu": request_cpu },
        }] } })
    }

    #[test]
    fn a_request_the_api_server_defaulted_to_the_limit_reads_as_unset() {
        let lr = limit_range("1", "1");
        let read = limit_range_value(Some(&lr), None);
        assert!(read.get("default_request_cpu").is_null());
        assert_eq!(read.get("default_cpu").as_str(), Some("1"));
    }

    #[test]
    fn a_request_the_configuration_named_reads_back_even_when_it_equals_the_limit() {
        let lr = limit_range("1", "1000m");
        let prior = LimitRangeConfig {
            default_request_cpu: Known::Value("1".to_owned()),
            ..LimitRangeConfig::default()
        };
        let read = limit_range_value(Some(&lr), Some(&prior));
        assert_eq!(read.get("default_request_cpu").as_str(), Some("1"));
    }

    #[test]
    fn a_request_other_than_the_limit_reads_back_as_drift() {
        let lr = limit_range("1", "500m");
        let read = limit_range_value(Some(&lr), None);
        assert_eq!(read.get("default_request_cpu").as_str(), Some("500m"));
    }
}
