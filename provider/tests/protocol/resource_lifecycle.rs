//! The managed resource lifecycle on `test_widget`: create, no-op, update, replace, destroy,
//! refresh, import, unknown configuration and secrets. Every plan and apply is checked by the
//! harness against Terraform's rules.

use gpufleet_engine::{
    consistency,
    path::AttrPath,
    value::{Refinements, Type, Value},
};
use terraform_provider_gpufleet::proto::tfplugin6 as pb;

use crate::{
    support::{Action, Harness, assert_no_errors, dv, engine_path, errors, from_dv, single_error},
    widget::{self, DEFAULT_SIZE, DEFAULT_ZONE, ID_PREFIX, TYPE, config, port, with},
};

fn id_of(state: &Value) -> String {
    state
        .get("id")
        .as_str()
        .unwrap_or_else(|| panic!("state has no known id: {state:?}"))
        .to_owned()
}

#[tokio::test]
async fn create_plans_unknown_computed_values_and_apply_makes_them_known() {
    let h = Harness::start().await;
    let cfg = with(
        config("lifecycle-create"),
        "port",
        Value::List(vec![port(8080, None), port(53, Some("udp"))]),
    );

    let plan = h.plan(TYPE, &Value::Null, &cfg).await;
    assert_no_errors(&plan.diagnostics, "plan");
    assert_eq!(plan.action, Action::Create);
    assert!(
        plan.requires_replace.is_empty(),
        "{:?}",
        plan.requires_replace
    );
    let planned = &plan.planned;
    assert_eq!(planned.get("name"), &Value::string("lifecycle-create"));
    assert_eq!(
        planned.get("size"),
        &Value::int(DEFAULT_SIZE),
        "the default fills size"
    );
    assert!(
        planned.get("zone").is_unknown(),
        "the backend picks the zone"
    );
    assert!(planned.get("status").is_unknown());
    match planned.get("id") {
        Value::Unknown(r) => {
            assert!(r.not_null, "the id refinement survives the wire: {r:?}");
            assert_eq!(r.string_prefix.as_deref(), Some(ID_PREFIX));
        }
        other => panic!("id should be unknown, is {other:?}"),
    }
    assert_eq!(planned.get("secret"), &Value::Null);
    assert_eq!(planned.get("timeouts"), &Value::Null);
    assert_eq!(
        planned.get("port"),
        &Value::List(vec![port(8080, Some("tcp")), port(53, Some("udp"))]),
        "the unset protocol is planned as its default"
    );
    assert_eq!(
        plan.identity,
        Some(Value::object([("name", Value::string("lifecycle-create"))])),
        "the identity is planned as soon as the name is known"
    );

    let applied = h.apply(&plan, &cfg).await;
    assert_no_errors(&applied.diagnostics, "apply");
    let state = &applied.new_state;
    let id = id_of(state);
    assert!(id.starts_with(ID_PREFIX), "{id}");
    assert_eq!(state.get("status"), &Value::string("ready"));
    assert_eq!(state.get("zone"), &Value::string(DEFAULT_ZONE));
    assert_eq!(state.get("size"), &Value::int(DEFAULT_SIZE));
    assert_eq!(
        applied.identity,
        Some(Value::object([("name", Value::string("lifecycle-create"))]))
    );
    assert_eq!(
        widget::stored(&id).as_ref(),
        Some(state),
        "the backend has it"
    );
}

#[tokio::test]
async fn plan_after_apply_is_a_no_op() {
    let h = Harness::start().await;
    let cfg = with(
        config("lifecycle-noop"),
        "port",
        Value::List(vec![port(443, None)]),
    );
    let state = h.create(TYPE, &cfg).await;

    let refreshed = h.read(TYPE, &state).await;
    assert_no_errors(&refreshed.diagnostics, "read");
    assert_eq!(refreshed.new_state, state, "no drift");

    let plan = h.plan(TYPE, &state, &cfg).await;
    assert_no_errors(&plan.diagnostics, "plan");
    assert!(plan.diagnostics.is_empty(), "{:?}", plan.diagnostics);
    assert_eq!(plan.action, Action::NoOp);
    assert_eq!(plan.planned, state, "planned equals prior");
    assert!(
        plan.requires_replace.is_empty(),
        "{:?}",
        plan.requires_replace
    );
    assert_eq!(
        plan.identity,
        Some(Value::object([("name", Value::string("lifecycle-noop"))]))
    );
}

#[tokio::test]
async fn size_change_updates_in_place_and_keeps_the_id() {
    let h = Harness::start().await;
    let before = with(config("lifecycle-update"), "size", Value::int(5));
    let state = h.create(TYPE, &before).await;
    let id = id_of(&state);

    let after = with(before, "size", Value::int(20));
    let plan = h.plan(TYPE, &state, &after).await;
    assert_no_errors(&plan.diagnostics, "plan");
    assert_eq!(plan.action, Action::Update);
    assert!(
        plan.requires_replace.is_empty(),
        "{:?}",
        plan.requires_replace
    );
    assert_eq!(plan.planned.get("size"), &Value::int(20));
    assert_eq!(
        plan.planned.get("id"),
        &Value::string(id.clone()),
        "use_state_for_unknown keeps the id"
    );
    assert_eq!(
        plan.proposed.get("status"),
        state.get("status"),
        "Terraform proposes the prior computed values"
    );
    assert!(
        plan.planned.get("status").is_unknown(),
        "status is decided by apply"
    );
    assert_eq!(plan.planned.get("name"), state.get("name"));

    let applied = h.apply(&plan, &after).await;
    assert_no_errors(&applied.diagnostics, "apply");
    assert_eq!(id_of(&applied.new_state), id);
    assert_eq!(applied.new_state.get("size"), &Value::int(20));
    assert_eq!(applied.new_state.get("zone"), state.get("zone"));
    assert_eq!(applied.new_state.get("status"), &Value::string("ready"));
    assert_eq!(widget::stored(&id).as_ref(), Some(&applied.new_state));
}

#[tokio::test]
async fn name_change_forces_replacement() {
    let h = Harness::start().await;
    let state = h.create(TYPE, &config("lifecycle-replace-old")).await;
    let old_id = id_of(&state);

    let cfg = config("lifecycle-replace-new");
    let plan = h.plan(TYPE, &state, &cfg).await;
    assert_no_errors(&plan.diagnostics, "plan");
    assert_eq!(plan.requires_replace, vec![AttrPath::attr("name")]);
    assert_eq!(plan.action, Action::Replace);
    assert!(
        plan.planned.get("id").is_unknown(),
        "the replacement is planned as a create: {:?}",
        plan.planned
    );

    let applied = h.apply(&plan, &cfg).await;
    assert_no_errors(&applied.diagnostics, "apply");
    let new_id = id_of(&applied.new_state);
    assert_ne!(new_id, old_id, "a new object");
    assert_eq!(
        applied.new_state.get("name"),
        &Value::string("lifecycle-replace-new")
    );
    assert_eq!(widget::stored(&old_id), None, "the old object is gone");
    assert!(widget::stored(&new_id).is_some());
}

#[tokio::test]
async fn destroy_plans_null_and_apply_returns_null() {
    let h = Harness::start().await;
    let state = h.create(TYPE, &config("lifecycle-destroy")).await;
    let id = id_of(&state);

    let plan = h.plan(TYPE, &state, &Value::Null).await;
    assert_no_errors(&plan.diagnostics, "plan");
    assert_eq!(plan.action, Action::Delete);
    assert_eq!(plan.planned, Value::Null);

    let applied = h.apply(&plan, &Value::Null).await;
    assert_no_errors(&applied.diagnostics, "apply");
    assert_eq!(applied.new_state, Value::Null);
    assert_eq!(widget::stored(&id), None);
    let read = h.read(TYPE, &state).await;
    assert_eq!(read.new_state, Value::Null);
}

#[tokio::test]
async fn read_after_out_of_band_delete_returns_null_and_plans_a_create() {
    let h = Harness::start().await;
    let cfg = config("lifecycle-gone");
    let state = h.create(TYPE, &cfg).await;
    assert!(widget::delete_out_of_band(&id_of(&state)));

    let read = h.read(TYPE, &state).await;
    assert_no_errors(&read.diagnostics, "read");
    assert_eq!(
        read.new_state,
        Value::Null,
        "a vanished object reads as null"
    );
    assert_eq!(read.identity, None);

    // Terraform then plans from the null state: the object is created again.
    let plan = h.plan(TYPE, &read.new_state, &cfg).await;
    assert_eq!(plan.action, Action::Create);
}

#[tokio::test]
async fn import_by_id_then_read_completes_the_state() {
    let h = Harness::start().await;
    let cfg = with(config("lifecycle-import-id"), "size", Value::int(3));
    let state = h.create(TYPE, &cfg).await;
    let id = id_of(&state);

    let (imported, diags) = h.import(TYPE, &id, None).await;
    assert_no_errors(&diags, "import");
    let [skeleton] = imported.as_slice() else {
        panic!("expected one imported resource, got {imported:?}")
    };
    assert_eq!(skeleton.get("id"), &Value::string(id.clone()));
    assert_eq!(
        skeleton.get("name"),
        &Value::Null,
        "only the id is known before read"
    );

    let read = h.read(TYPE, skeleton).await;
    assert_no_errors(&read.diagnostics, "read");
    assert_eq!(read.new_state, state);
    assert_eq!(
        read.identity,
        Some(Value::object([(
            "name",
            Value::string("lifecycle-import-id")
        )]))
    );

    // The imported object matches its configuration.
    let plan = h.plan(TYPE, &read.new_state, &cfg).await;
    assert_eq!(plan.action, Action::NoOp);

    // Importing what does not exist reads as null, which Terraform reports to the user.
    let (imported, diags) = h.import(TYPE, "w-does-not-exist", None).await;
    assert_no_errors(&diags, "import");
    let read = h.read(TYPE, &imported[0]).await;
    assert_eq!(read.new_state, Value::Null);
    // An empty id is the kind's own error.
    let (imported, diags) = h.import(TYPE, "", None).await;
    assert!(imported.is_empty());
    assert_eq!(single_error(&diags, "import").summary, "Missing Import ID");
}

#[tokio::test]
async fn import_by_identity_then_read_completes_the_state() {
    let h = Harness::start().await;
    let state = h.create(TYPE, &config("lifecycle-import-identity")).await;

    let identity = Value::object([("name", Value::string("lifecycle-import-identity"))]);
    let (imported, diags) = h.import(TYPE, "", Some(&identity)).await;
    assert_no_errors(&diags, "import");
    let [skeleton] = imported.as_slice() else {
        panic!("expected one imported resource, got {imported:?}")
    };
    assert_eq!(
        skeleton.get("name"),
        &Value::string("lifecycle-import-identity")
    );
    assert_eq!(skeleton.get("id"), &Value::Null);

    let read = h.read(TYPE, skeleton).await;
    assert_no_errors(&read.diagnostics, "read");
    assert_eq!(read.new_state, state);
    assert_eq!(read.identity, Some(identity));
}

#[tokio::test]
async fn unknown_zone_in_config_stays_unknown_until_apply() {
    let h = Harness::start().await;
    let at_plan = with(config("lifecycle-unknown-zone"), "zone", Value::unknown());
    let plan = h.plan(TYPE, &Value::Null, &at_plan).await;
    assert_no_errors(&plan.diagnostics, "plan");
    assert!(
        plan.planned.get("zone").is_unknown(),
        "a configured unknown stays unknown"
    );
    assert_eq!(
        plan.planned.get("name"),
        &Value::string("lifecycle-unknown-zone")
    );

    // At apply time the value is known; the harness re-plans and checks consistency.
    let at_apply = with(at_plan, "zone", Value::string("zone-z"));
    let applied = h.apply(&plan, &at_apply).await;
    assert_no_errors(&applied.diagnostics, "apply");
    assert_eq!(applied.new_state.get("zone"), &Value::string("zone-z"));
}

#[tokio::test]
async fn refined_unknown_config_keeps_its_refinements_through_the_plan() {
    let h = Harness::start().await;
    let refined = Value::Unknown(Box::new(Refinements {
        not_null: true,
        string_prefix: Some("zone-".to_owned()),
        ..Refinements::default()
    }));
    let at_plan = with(config("lifecycle-refined-zone"), "zone", refined.clone());
    let plan = h.plan(TYPE, &Value::Null, &at_plan).await;
    assert_no_errors(&plan.diagnostics, "plan");
    assert_eq!(
        plan.planned.get("zone"),
        &refined,
        "Terraform's refinements come back as they were sent"
    );
    let applied = h
        .apply(&plan, &with(at_plan, "zone", Value::string("zone-q")))
        .await;
    assert_no_errors(&applied.diagnostics, "apply");
    assert_eq!(applied.new_state.get("zone"), &Value::string("zone-q"));
}

#[tokio::test]
async fn dynamic_port_blocks_over_an_unknown_collection_stay_unknown() {
    let h = Harness::start().await;
    let at_plan = with(config("lifecycle-dynamic-ports"), "port", Value::unknown());
    let plan = h.plan(TYPE, &Value::Null, &at_plan).await;
    assert_no_errors(&plan.diagnostics, "plan");
    assert!(plan.planned.get("port").is_unknown(), "{:?}", plan.planned);

    let at_apply = with(
        at_plan,
        "port",
        Value::List(vec![port(80, None), port(443, None)]),
    );
    let applied = h.apply(&plan, &at_apply).await;
    assert_no_errors(&applied.diagnostics, "apply");
    assert_eq!(
        applied.new_state.get("port"),
        &Value::List(vec![port(80, Some("tcp")), port(443, Some("tcp"))])
    );
}

#[tokio::test]
async fn size_default_applies_only_when_size_is_unset() {
    let h = Harness::start().await;
    let unset = config("lifecycle-defaults");
    let plan = h.plan(TYPE, &Value::Null, &unset).await;
    assert_eq!(plan.planned.get("size"), &Value::int(DEFAULT_SIZE));

    let set = with(unset.clone(), "size", Value::int(3));
    let plan = h.plan(TYPE, &Value::Null, &set).await;
    assert_eq!(
        plan.planned.get("size"),
        &Value::int(3),
        "configuration wins"
    );

    let unknown = with(unset, "size", Value::unknown());
    let plan = h.plan(TYPE, &Value::Null, &unknown).await;
    assert!(
        plan.planned.get("size").is_unknown(),
        "no default over an unknown"
    );
    let applied = h.apply(&plan, &with(unknown, "size", Value::int(7))).await;
    assert_no_errors(&applied.diagnostics, "apply");
    assert_eq!(applied.new_state.get("size"), &Value::int(7));

    // Removing size from the configuration plans the default again.
    let state = applied.new_state;
    let plan = h.plan(TYPE, &state, &config("lifecycle-defaults")).await;
    assert_eq!(plan.action, Action::Update);
    assert_eq!(plan.planned.get("size"), &Value::int(DEFAULT_SIZE));
}

#[tokio::test]
async fn invalid_port_number_is_reported_inside_the_list_block() {
    let h = Harness::start().await;
    let cfg = with(
        config("lifecycle-bad-port"),
        "port",
        Value::List(vec![port(22, None), port(70000, Some("tcp"))]),
    );
    let plan = h.plan(TYPE, &Value::Null, &cfg).await;
    let d = single_error(&plan.diagnostics, "validate");
    assert_eq!(d.summary, "Invalid Port Number");
    assert_eq!(
        d.attribute.as_ref().map(engine_path),
        Some(AttrPath::attr("port").push_index(1).push_attr("number"))
    );
}

#[tokio::test]
async fn failed_create_leaves_nothing_behind() {
    let h = Harness::start().await;
    let cfg = config("fail-create");
    let plan = h.plan(TYPE, &Value::Null, &cfg).await;
    assert_no_errors(&plan.diagnostics, "plan");
    let applied = h.apply(&plan, &cfg).await;
    let d = single_error(&applied.diagnostics, "apply");
    assert_eq!(d.summary, "Widget Creation Failed");
    assert_eq!(applied.new_state, Value::Null, "nothing was created");
}

#[tokio::test]
async fn secret_never_appears_in_any_diagnostic() {
    const SECRET: &str = "correct-horse-battery-staple";
    const WEAK: &str = "pw-1234";
    let h = Harness::start().await;

    // A full lifecycle with a secret.
    let cfg = with(config("lifecycle-secret"), "secret", Value::string(SECRET));
    let state = h.create(TYPE, &cfg).await;
    assert_eq!(
        state.get("secret"),
        &Value::string(SECRET),
        "the secret is stored"
    );
    let bigger = with(cfg.clone(), "size", Value::int(11));
    let plan = h.plan(TYPE, &state, &bigger).await;
    let state = h.apply(&plan, &bigger).await.new_state;
    h.read(TYPE, &state).await;

    // A weak secret is rejected at its attribute, without repeating it.
    let weak = with(
        config("lifecycle-secret-weak"),
        "secret",
        Value::string(WEAK),
    );
    let plan = h.plan(TYPE, &Value::Null, &weak).await;
    let d = single_error(&plan.diagnostics, "validate");
    assert_eq!(d.summary, "Weak Widget Secret");
    assert_eq!(
        d.attribute.as_ref().map(engine_path),
        Some(AttrPath::attr("secret"))
    );

    // A failing apply of a resource with a secret.
    let failing = with(config("fail-secret"), "secret", Value::string(SECRET));
    let plan = h.plan(TYPE, &Value::Null, &failing).await;
    let applied = h.apply(&plan, &failing).await;
    assert_eq!(errors(&applied.diagnostics).len(), 1);

    let text = h.all_diagnostic_text();
    assert!(text.contains("Weak Widget Secret") && text.contains("Widget Creation Failed"));
    assert!(
        !text.contains(SECRET),
        "the secret leaked into a diagnostic:\n{text}"
    );
    assert!(
        !text.contains(WEAK),
        "the weak secret leaked into a diagnostic:\n{text}"
    );
}

#[tokio::test]
async fn consistency_check_catches_a_changed_secret_without_printing_it() {
    const SECRET: &str = "the-planned-secret-value";
    let h = Harness::start().await;
    let schema = h.resource_schema(TYPE);
    let ty: Type = schema.value_type();
    let cfg = with(config("drift-secret-1"), "secret", Value::string(SECRET));
    let plan = h.plan(TYPE, &Value::Null, &cfg).await;
    assert_no_errors(&plan.diagnostics, "plan");

    // Applied by hand: the harness would (rightly) fail the test on this provider bug.
    let resp = h
        .client()
        .apply_resource_change(pb::apply_resource_change::Request {
            type_name: TYPE.to_owned(),
            prior_state: Some(dv(&Value::Null, &ty)),
            planned_state: Some(dv(&plan.planned, &ty)),
            config: Some(dv(&cfg, &ty)),
            planned_private: plan.private.clone(),
            provider_meta: None,
            planned_identity: None,
        })
        .await
        .expect("ApplyResourceChange")
        .into_inner();
    assert_no_errors(&resp.diagnostics, "apply");
    let new_state = from_dv(resp.new_state.as_ref(), &ty);

    let errs = consistency::assert_object_compatible(&schema.block, &plan.planned, &new_state);
    assert_eq!(
        errs.iter().map(|e| e.path.clone()).collect::<Vec<_>>(),
        vec![AttrPath::attr("secret")],
        "{errs:?}"
    );
    for e in &errs {
        let text = e
            .to_diagnostic("Provider produced inconsistent result after apply")
            .detail;
        assert!(!text.contains(SECRET), "{text}");
        assert!(!text.contains("something-else-entirely"), "{text}");
        assert!(text.contains("sensitive"), "{text}");
    }
}
