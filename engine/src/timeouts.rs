//! The `timeouts` block every resource shares: how long create, read, update and delete may
//! take before gpufleet gives up.
//!
//! The block is declared once here ([`block`]) and read with [`Timeouts::from_value`]. Each
//! resource supplies its own defaults and a description that states them. Values are
//! durations in the `humantime` syntax (`"90s"`, `"10m"`, `"1h30m"`), checked offline by
//! [`PositiveDuration`], so a typo is a plan-time diagnostic on the offending line rather than a
//! surprise during apply. The engine applies a timeout around a whole operation, including the
//! waits for the backend to converge; it never bounds a single HTTP call by it alone.

use std::time::Duration;

use crate::{
    schema::{Attribute, Block, NestedBlock},
    validate::PositiveDuration,
    value::{Type, Value},
};

/// Name of the block in every resource's schema.
pub const BLOCK_NAME: &str = "timeouts";

/// How long each operation of a resource may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Creating the object, including waiting for it to become ready.
    pub create: Duration,
    /// Refreshing the object.
    pub read: Duration,
    /// Changing the object in place, including waiting for it to converge.
    pub update: Duration,
    /// Deleting the object, including waiting for it to disappear.
    pub delete: Duration,
}

/// Which operation a timeout is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `create`.
    Create,
    /// `read`.
    Read,
    /// `update`.
    Update,
    /// `delete`.
    Delete,
}

impl Operation {
    /// The attribute name in the block.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Read => "read",
            Operation::Update => "update",
            Operation::Delete => "delete",
        }
    }
}

impl Timeouts {
    /// The same timeout for every operation.
    pub const fn uniform(d: Duration) -> Timeouts {
        Timeouts {
            create: d,
            read: d,
            update: d,
            delete: d,
        }
    }

    /// The timeouts configured in `block_value` (the value of the `timeouts` block, which may
    /// be null), falling back to `defaults` for each operation left unset, unknown or invalid.
    /// Invalid values never get this far in practice: validation reports them at plan time.
    pub fn from_value(block_value: &Value, defaults: Timeouts) -> Timeouts {
        let pick = |op: Operation, default: Duration| {
            block_value
                .get(op.name())
                .as_str()
                .and_then(|s| PositiveDuration::parse(s).ok())
                .unwrap_or(default)
        };
        Timeouts {
            create: pick(Operation::Create, defaults.create),
            read: pick(Operation::Read, defaults.read),
            update: pick(Operation::Update, defaults.update),
            delete: pick(Operation::Delete, defaults.delete),
        }
    }

    /// The timeouts of a resource's state or planned value (its `timeouts` attribute).
    pub fn of_resource(value: &Value, defaults: Timeouts) -> Timeouts {
        Timeouts::from_value(value.get(BLOCK_NAME), defaults)
    }

    /// The timeout for one operation.
    pub fn get(&self, op: Operation) -> Duration {
        match op {
            Operation::Create => self.create,
            Operation::Read => self.read,
            Operation::Update => self.update,
            Operation::Delete => self.delete,
        }
    }
}

/// Renders a duration the way users write it (`"10m"`, `"1h 30m"`), for messages: whole
/// seconds from a second on, whole milliseconds below, never `"20s 1ms 951us 851ns"`.
pub fn render(d: Duration) -> String {
    let readable = if d >= Duration::from_secs(1) {
        Duration::from_secs(d.as_secs() + u64::from(d.subsec_millis() >= 500))
    } else {
        Duration::from_millis(u64::from(d.subsec_millis()))
    };
    humantime::format_duration(readable).to_string()
}

/// The shared `timeouts` block. `description` should name the resource's defaults, e.g.
/// "How long operations may take. Defaults: create 10m, update 10m, delete 10m, read 2m."
pub fn block(description: &'static str) -> NestedBlock {
    let attr = |name: &'static str, text: &'static str| {
        Attribute::optional(name, Type::String)
            .describe(text)
            .validate(PositiveDuration::new())
    };
    NestedBlock::single(
        BLOCK_NAME,
        Block::new(description)
            .attr(attr(
                "create",
                "How long creating may take, including waiting for readiness.",
            ))
            .attr(attr(
                "update",
                "How long an in-place update may take, including waiting for it to converge.",
            ))
            .attr(attr(
                "delete",
                "How long deleting may take, including waiting for the objects to disappear.",
            ))
            .attr(attr("read", "How long a refresh may take.")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{path::AttrPath, validate::validate_block};

    const DEFAULTS: Timeouts = Timeouts {
        create: Duration::from_secs(600),
        read: Duration::from_secs(120),
        update: Duration::from_secs(300),
        delete: Duration::from_secs(900),
    };

    fn timeouts(create: Value, delete: Value) -> Value {
        Value::object([
            ("create", create),
            ("update", Value::Null),
            ("delete", delete),
            ("read", Value::Null),
        ])
    }

    #[test]
    fn configured_values_override_defaults() {
        let t = Timeouts::from_value(
            &timeouts(Value::string("90s"), Value::string("1h30m")),
            DEFAULTS,
        );
        assert_eq!(t.create, Duration::from_secs(90));
        assert_eq!(t.delete, Duration::from_secs(5400));
        assert_eq!(t.update, DEFAULTS.update);
        assert_eq!(t.read, DEFAULTS.read);
    }

    #[test]
    fn null_block_and_unknowns_fall_back_to_defaults() {
        assert_eq!(Timeouts::from_value(&Value::Null, DEFAULTS), DEFAULTS);
        assert_eq!(
            Timeouts::from_value(&timeouts(Value::unknown(), Value::Null), DEFAULTS),
            DEFAULTS
        );
    }

    #[test]
    fn invalid_durations_are_diagnosed_on_their_attribute() {
        let schema = Block::new("").block(block("Timeouts."));
        let config = Value::object([(
            BLOCK_NAME,
            timeouts(Value::string("10 minutes please"), Value::string("0s")),
        )]);
        let d = validate_block(&schema, &config);
        let paths: Vec<Option<AttrPath>> = d.iter().map(|d| d.path.clone()).collect();
        assert_eq!(
            paths,
            [
                Some(AttrPath::attr("timeouts").push_attr("create")),
                Some(AttrPath::attr("timeouts").push_attr("delete")),
            ]
        );
        assert!(d.0[0].detail.contains("\"10m\""), "{}", d.0[0].detail);
    }

    #[test]
    fn renders_like_users_write() {
        assert_eq!(render(Duration::from_secs(600)), "10m");
        assert_eq!(render(Duration::new(20, 1_951_851)), "20s");
        assert_eq!(render(Duration::new(89, 600_000_000)), "1m 30s");
        assert_eq!(render(Duration::from_micros(1_500)), "1ms");
        assert_eq!(render(Duration::ZERO), "0s");
    }
}
