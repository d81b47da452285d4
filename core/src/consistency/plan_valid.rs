//! Whether a planned new state is a valid plan for a configuration (Terraform's
//! `objchange.AssertPlanValid`, reported as "Provider produced invalid plan").

use super::{
    PathError, attr_is_secret, attr_of, bare, block_is_secret, checks::conformance_errors, entries,
    length_range, render, same_unrefined, seq, shown,
};
use crate::{
    path::AttrPath,
    schema::{AttrMode, AttrType, Attribute, Block, Nesting},
    value::Value,
};

/// Checks that `planned` is a valid plan to move from `prior` to `config`.
///
/// `prior` is null for a create, and `config` is null for a destroy, when `planned` must be
/// null too. Values come in as Terraform sent them and as the provider answered. The rules:
///
/// - `planned` fits the schema type.
/// - Each attribute is planned as configured, or as it was in `prior` (when both prior and
///   config are non-null). Otherwise the attribute must be computed: computed-only attributes
///   may be planned as anything, including unknown, and optional-computed ones may be when the
///   configuration leaves them null. A configured value the provider cannot honour
///   ("planned value … does not match config value …") or a value for an unset, non-computed
///   attribute ("… for a non-computed attribute") is a provider bug.
/// - An unknown configuration value stays unknown, unless the attribute is computed-only.
/// - Write-only attributes are planned null.
/// - Nested attributes and blocks exist exactly where the configuration has them. Lists and
///   maps of them have the configuration's length and keys. A set of nested attributes must be
///   able to reach the configuration's length. Sets of blocks are not compared, because their
///   elements cannot be correlated.
/// - A collection of blocks is planned empty, never null. No block element is wholly unknown,
///   and a block generated from an unknown `for_each` stays unknown.
pub fn assert_plan_valid(
    schema: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
) -> Vec<PathError> {
    let errs: Vec<PathError> = conformance_errors(&schema.value_type(), planned)
        .into_iter()
        .map(|e| PathError {
            message: format!("planned value has the wrong type: {}", e.message),
            ..e
        })
        .collect();
    // The walk below assumes the schema's shape, as Terraform's does.
    if !errs.is_empty() {
        return errs;
    }
    let mut errs = Vec::new();
    check_block(schema, prior, config, planned, &AttrPath::root(), &mut errs);
    errs
}

fn check_block(
    block: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &AttrPath,
    errs: &mut Vec<PathError>,
) {
    let (prior, config, planned) = (bare(prior), bare(config), bare(planned));
    match (config.is_null(), planned.is_null()) {
        (false, true) => {
            return errs.push(PathError::new(
                path,
                "planned for absence but config wants existence",
            ));
        }
        (true, false) => {
            return errs.push(PathError::new(
                path,
                "planned for existence but config wants absence",
            ));
        }
        (true, true) => return,
        (false, false) => {}
    }

    check_attrs(&block.attributes, prior, config, planned, path, false, errs);

    for nb in &block.blocks {
        let path = path.push_attr(nb.type_name);
        let planned_v = attr_of(planned, nb.type_name);
        let config_v = attr_of(config, nb.type_name);
        let prior_v = attr_of(prior, nb.type_name);
        let (planned_v, config_v, prior_v) = (bare(&planned_v), bare(&config_v), bare(&prior_v));

        // Only a single block may be absent; collections say "no blocks" by being empty.
        let collection = match nb.nesting {
            Nesting::Single => None,
            Nesting::List => Some("list"),
            Nesting::Set => Some("set"),
            Nesting::Map => Some("map"),
            Nesting::Group => Some("group"),
        };
        if let Some(mode) = collection
            && planned_v.is_null()
        {
            errs.push(PathError::new(
                &path,
                format!("attribute representing a {mode} of nested blocks must be empty to indicate no blocks, not null"),
            ));
            continue;
        }
        if same_unrefined(planned_v, config_v) {
            continue;
        }
        // An unknown block comes from a `dynamic` block over an unknown collection; the
        // provider cannot know how many blocks there will be.
        if config_v.is_unknown() {
            let shown = shown(planned_v, block_is_secret(&nb.block));
            errs.push(PathError::new(
                &path,
                format!("planned value {shown} for unknown dynamic block"),
            ));
            continue;
        }
        if planned_v.is_unknown() {
            errs.push(PathError::new(
                &path,
                "planned unknown value for non-computed block",
            ));
            continue;
        }

        match nb.nesting {
            Nesting::Single | Nesting::Group => {
                check_block(&nb.block, prior_v, config_v, planned_v, &path, errs);
            }
            Nesting::List => {
                let planned_l = seq(planned_v).unwrap_or_default();
                // Configuration never decodes a block list as null, but a legacy provider's
                // null can come back through ignore_changes; read it as empty.
                let config_l = seq(config_v).unwrap_or_default();
                if planned_l.len() != config_l.len() {
                    errs.push(PathError::new(
                        &path,
                        format!(
                            "block count in plan ({}) disagrees with count in config ({})",
                            planned_l.len(),
                            config_l.len()
                        ),
                    ));
                    continue;
                }
                let prior_l = seq(prior_v).unwrap_or_default();
                for (i, (planned_e, config_e)) in planned_l.iter().zip(config_l).enumerate() {
                    let path = path.push_index(i);
                    if bare(planned_e).is_unknown() {
                        errs.push(wholly_unknown_block(&path));
                        continue;
                    }
                    let prior_e = prior_l.get(i).unwrap_or(&Value::Null);
                    check_block(&nb.block, prior_e, config_e, planned_e, &path, errs);
                }
            }
            Nesting::Map => check_block_map(&nb.block, prior_v, config_v, planned_v, &path, errs),
            Nesting::Set => {
                // Set elements have no identity to correlate plan and config by (a planned
                // element may mix prior and config values), so only wholly unknown elements
                // are caught.
                for (i, planned_e) in seq(planned_v).unwrap_or_default().iter().enumerate() {
                    if bare(planned_e).is_unknown() {
                        errs.push(wholly_unknown_block(&path.push_index(i)));
                    }
                }
            }
        }
    }
}

fn wholly_unknown_block(path: &AttrPath) -> PathError {
    PathError::new(
        path,
        "element representing nested block must not be unknown itself; set nested attribute values to unknown instead",
    )
}

fn check_block_map(
    block: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &AttrPath,
    errs: &mut Vec<PathError>,
) {
    let empty = Default::default();
    let planned_m = entries(planned).unwrap_or(&empty);
    let config_m = entries(config).unwrap_or(&empty);
    let prior_m = entries(prior).unwrap_or(&empty);
    // Maps of blocks with dynamic attributes travel as objects, and Terraform checks those by
    // key alone; true maps get the count check first.
    if matches!(planned, Value::Map(_)) && planned_m.len() != config_m.len() {
        errs.push(PathError::new(
            path,
            format!(
                "block count in plan ({}) disagrees with count in config ({})",
                planned_m.len(),
                config_m.len()
            ),
        ));
        return;
    }
    for (k, planned_e) in planned_m {
        let Some(config_e) = config_m.get(k) else {
            errs.push(PathError::new(
                path,
                format!("block key {k:?} from plan is not present in config"),
            ));
            continue;
        };
        let path = path.push_key(k);
        if bare(planned_e).is_unknown() {
            errs.push(wholly_unknown_block(&path));
            continue;
        }
        let prior_e = prior_m.get(k).unwrap_or(&Value::Null);
        check_block(block, prior_e, config_e, planned_e, &path, errs);
    }
    for k in config_m.keys().filter(|k| !planned_m.contains_key(*k)) {
        errs.push(PathError::new(
            path,
            format!("block key {k:?} from config is not present in plan"),
        ));
    }
}

/// Checks the attributes of one object. `secret` is set inside a sensitive nested attribute,
/// whose children must not be printed either.
fn check_attrs(
    attrs: &[Attribute],
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &AttrPath,
    secret: bool,
    errs: &mut Vec<PathError>,
) {
    for attr in attrs {
        let (prior_v, config_v, planned_v) = (
            attr_of(prior, attr.name),
            attr_of(config, attr.name),
            attr_of(planned, attr.name),
        );
        check_attr(
            attr,
            &prior_v,
            &config_v,
            &planned_v,
            &path.push_attr(attr.name),
            secret,
            errs,
        );
    }
}

fn check_attr(
    attr: &Attribute,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &AttrPath,
    secret: bool,
    errs: &mut Vec<PathError>,
) {
    let (prior, config, planned) = (bare(prior), bare(config), bare(planned));
    // Terraform checks write-only values separately after planning; folding it in here means a
    // provider cannot pass by echoing the configured secret back.
    if attr.write_only {
        if !planned.is_null() {
            errs.push(PathError::new(
                path,
                "planned value for write-only attribute is not null",
            ));
        }
        return;
    }
    if same_unrefined(planned, config) {
        return;
    }
    // The provider may keep the prior value when it is equivalent to the configured one.
    if !prior.is_null() && !config.is_null() && same_unrefined(planned, prior) {
        return;
    }
    let sensitive = secret || attr.sensitive;
    match attr.mode {
        // The provider owns computed-only values. A configured value can still reach here via
        // ignore_changes, but that is no fault of the provider.
        AttrMode::Computed => return,
        AttrMode::OptionalComputed if config.is_null() => return,
        _ if config.is_null() => {
            let message = if sensitive {
                "sensitive planned value for a non-computed attribute".to_owned()
            } else {
                let shown = shown(planned, attr_is_secret(attr));
                format!("planned value {shown} for a non-computed attribute")
            };
            return errs.push(PathError::new(path, message));
        }
        _ => {}
    }
    if let AttrType::Nested {
        nesting,
        attributes,
    } = &attr.ty
    {
        return check_nested(
            *nesting, attributes, prior, config, planned, path, sensitive, errs,
        );
    }
    let message = match (sensitive, prior.is_null()) {
        (true, true) => "sensitive planned value does not match config value".to_owned(),
        (true, false) => {
            "sensitive planned value does not match config value nor prior value".to_owned()
        }
        (false, true) => format!(
            "planned value {} does not match config value {}",
            render(planned),
            render(config)
        ),
        (false, false) => format!(
            "planned value {} does not match config value {} nor prior value {}",
            render(planned),
            render(config),
            render(prior)
        ),
    };
    errs.push(PathError::new(path, message));
}

/// Checks a nested attribute whose planned value differs from its configuration.
// The three values, the path, the inherited redaction and the sink are all needed here.
#[allow(clippy::too_many_arguments)]
fn check_nested(
    nesting: Nesting,
    attrs: &[Attribute],
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &AttrPath,
    secret: bool,
    errs: &mut Vec<PathError>,
) {
    match (config.is_null(), planned.is_null()) {
        (false, true) => {
            return errs.push(PathError::new(
                path,
                "planned for absence but config wants existence",
            ));
        }
        (true, false) => {
            return errs.push(PathError::new(
                path,
                "planned for existence but config wants absence",
            ));
        }
        (true, true) => return,
        (false, false) => {}
    }
    if planned.is_unknown() {
        return errs.push(PathError::new(path, "planned unknown for configured value"));
    }

    match nesting {
        Nesting::Single | Nesting::Group => {
            check_attrs(attrs, prior, config, planned, path, secret, errs);
        }
        Nesting::List => {
            let planned_l = seq(planned).unwrap_or_default();
            // An unknown configured list has no length to agree with.
            let Some(config_l) = seq(config) else {
                return errs.push(count_mismatch(
                    path,
                    &planned_l.len().to_string(),
                    "unknown",
                ));
            };
            if planned_l.len() != config_l.len() {
                return errs.push(count_mismatch(
                    path,
                    &planned_l.len().to_string(),
                    &config_l.len().to_string(),
                ));
            }
            let prior_l = seq(prior).unwrap_or_default();
            for (i, (planned_e, config_e)) in planned_l.iter().zip(config_l).enumerate() {
                let prior_e = prior_l.get(i).unwrap_or(&Value::Null);
                check_attrs(
                    attrs,
                    prior_e,
                    config_e,
                    planned_e,
                    &path.push_index(i),
                    secret,
                    errs,
                );
            }
        }
        Nesting::Map => {
            let empty = Default::default();
            let planned_m = entries(planned).unwrap_or(&empty);
            let Some(config_m) = entries(config) else {
                return errs.push(count_mismatch(
                    path,
                    &planned_m.len().to_string(),
                    "unknown",
                ));
            };
            if planned_m.len() != config_m.len() {
                return errs.push(count_mismatch(
                    path,
                    &planned_m.len().to_string(),
                    &config_m.len().to_string(),
                ));
            }
            let prior_m = entries(prior).unwrap_or(&empty);
            for (k, planned_e) in planned_m {
                let Some(config_e) = config_m.get(k) else {
                    errs.push(PathError::new(
                        path,
                        format!("map key {k:?} from plan is not present in config"),
                    ));
                    continue;
                };
                let prior_e = prior_m.get(k).unwrap_or(&Value::Null);
                check_attrs(
                    attrs,
                    prior_e,
                    config_e,
                    planned_e,
                    &path.push_key(k),
                    secret,
                    errs,
                );
            }
            for k in config_m.keys().filter(|k| !planned_m.contains_key(*k)) {
                errs.push(PathError::new(
                    path,
                    format!("map key {k:?} from config is not present in plan"),
                ));
            }
        }
        Nesting::Set => {
            // Elements cannot be correlated, but the planned set must be able to end up with
            // as many elements as configured (unknown elements may still merge).
            let (Some((p_lo, p_hi)), Some((c_lo, c_hi))) =
                (length_range(planned), length_range(config))
            else {
                return;
            };
            if c_hi < p_lo || c_lo > p_hi {
                errs.push(count_mismatch(path, &span(p_lo, p_hi), &span(c_lo, c_hi)));
            }
        }
    }
}

fn count_mismatch(path: &AttrPath, planned: &str, config: &str) -> PathError {
    PathError::new(
        path,
        format!("count in plan ({planned}) disagrees with count in config ({config})"),
    )
}

fn span(lo: u64, hi: u64) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo} to {hi}")
    }
}
