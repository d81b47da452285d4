//! Updates that change only what the provider keeps to itself.

use crate::{kinds::ApplyResponse, value::Value};

/// The response to an update that changes none of the `remote` attributes (only local
/// settings such as timeouts), so the backend need not be asked: `planned`, with those of the
/// `carried` computed attributes it left unknown taken from `prior`. `None` when a remote
/// attribute changes.
pub fn local_update(
    prior: &Value,
    planned: &Value,
    remote: &[&str],
    carried: &[&str],
) -> Option<ApplyResponse> {
    if !planned.same_attrs(prior, remote) {
        return None;
    }
    let mut s = planned.clone();
    s.keep_from(prior, carried);
    Some(ApplyResponse::done(s.with_unknowns_nulled()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(size: i64, status: Value) -> Value {
        Value::object([
            ("size", Value::int(size)),
            ("status", status),
            ("note", Value::unknown()),
        ])
    }

    #[test]
    fn a_local_change_keeps_what_the_backend_reported() {
        let prior = state(1, Value::string("UP"));
        let planned = state(1, Value::unknown());
        let Some(r) = local_update(&prior, &planned, &["size"], &["status"]) else {
            panic!("nothing remote changed");
        };
        assert_eq!(r.new_state.get("status"), &Value::string("UP"));
        assert_eq!(r.new_state.get("note"), &Value::Null);
        assert!(r.diagnostics.is_empty());
    }

    #[test]
    fn a_remote_change_goes_to_the_backend() {
        let prior = state(1, Value::string("UP"));
        assert!(
            local_update(&prior, &state(2, Value::unknown()), &["size"], &["status"]).is_none()
        );
    }
}
