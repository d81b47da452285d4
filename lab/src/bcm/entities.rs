//! Adding, updating and removing devices, categories and software images: each commit
//! checks and normalises the whole object (reporting every problem at once, as BCM's
//! validation list does) and fills the defaults and sentinels clients read back
//! (`""` install mode, the zero image uuid, `0.0.0.0` for an unset interface address,
//! `CATEGORY` boot loader).
//!
//! Updates are whole-object: the stored object becomes the one sent (fields this
//! emulator does not know are kept as sent). A non-empty `revision` that differs from
//! the stored one refuses the update; `""` (or none) overwrites.

use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use super::model::{Db, Obj, ZERO_UUID, str_field};
use super::store::{CallError, Validation};
use super::uuid::is_uuid;

/// Install modes a node or category may name.
pub const INSTALL_MODES: [&str; 5] = ["AUTO", "FULL", "MAIN", "NOSYNC", "SKIP"];

const ZERO_MAC: &str = "00:00:00:00:00:00";

/// The kind of entity a commit is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A device (`cmdevice.*Device`).
    Device,
    /// A category (`cmdevice.*Category`).
    Category,
    /// A software image (`cmpart.*SoftwareImage`).
    Image,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Self::Device => "device",
            Self::Category => "category",
            Self::Image => "software image",
        }
    }

    fn map(self, db: &Db) -> &std::collections::BTreeMap<String, Obj> {
        match self {
            Self::Device => &db.devices,
            Self::Category => &db.categories,
            Self::Image => &db.images,
        }
    }

    fn map_mut(self, db: &mut Db) -> &mut std::collections::BTreeMap<String, Obj> {
        match self {
            Self::Device => &mut db.devices,
            Self::Category => &mut db.categories,
            Self::Image => &mut db.images,
        }
    }
}

/// Collects validation problems.
#[derive(Debug, Default)]
struct Problems(Vec<Validation>);

impl Problems {
    fn bad(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(Validation::error(field, "BAD_VALUE", message));
    }
    fn null(&mut self, field: &str) {
        self.0.push(Validation::error(
            field,
            "NOT_NULL",
            format!("{field} must be set"),
        ));
    }
    fn duplicate(&mut self, field: &str, message: impl Into<String>, other: &str) {
        self.0
            .push(Validation::error(field, "DUPLICATE_FIELD", message).about(other));
    }
}

/// A field that is absent or `null` reads as `None`.
fn get<'a>(obj: &'a Obj, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// A string field with a default; a non-string is a problem (and reads as the default).
fn string_or(obj: &Obj, key: &str, default: &str, p: &mut Problems) -> String {
    match get(obj, key) {
        None => default.to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            p.bad(key, format!("{key} must be a string"));
            default.to_owned()
        }
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with('-')
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
}

fn valid_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

fn install_mode(obj: &Obj, key: &str, inherit: &str, p: &mut Problems) -> String {
    let mode = string_or(obj, key, "", p).to_ascii_uppercase();
    if mode.is_empty() || mode == "CATEGORY" {
        inherit.to_owned()
    } else if INSTALL_MODES.contains(&mode.as_str()) {
        mode
    } else {
        p.bad(
            key,
            format!(
                "{key} {mode:?} is not one of {}, or empty",
                INSTALL_MODES.join(", ")
            ),
        );
        inherit.to_owned()
    }
}

/// `softwareImageProxy`: `null` → the zero uuid (inherit); else an existing image.
fn image_proxy(db: &Db, obj: &Obj, p: &mut Problems) -> Value {
    let proxy = match get(obj, "softwareImageProxy") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            p.bad(
                "softwareImageProxy",
                "softwareImageProxy must be an object {parentSoftwareImage} or null",
            );
            Map::new()
        }
    };
    let mut proxy = proxy;
    let image = string_or(&proxy, "parentSoftwareImage", ZERO_UUID, p);
    let image = if image.is_empty() {
        ZERO_UUID.to_owned()
    } else {
        image
    };
    if image != ZERO_UUID && !db.images.contains_key(&image) {
        p.bad(
            "softwareImageProxy",
            format!("no software image with uuid {image}"),
        );
    }
    proxy.insert("parentSoftwareImage".into(), json!(image));
    Value::Object(proxy)
}

/// The uuid of a commit's object, checked; `None` when it cannot be used.
fn entity_uuid(kind: Kind, db: &Db, obj: &Obj, adding: bool, p: &mut Problems) -> Option<String> {
    let uuid = match get(obj, "uuid") {
        Some(Value::String(s)) if !s.is_empty() && s != ZERO_UUID => s.clone(),
        Some(Value::String(_)) | None => {
            p.0.push(Validation::error(
                "uuid",
                "NOT_NULL",
                "Zero UUID: the client assigns the uuid before the first commit",
            ));
            return None;
        }
        Some(_) => {
            p.bad("uuid", "uuid must be a string");
            return None;
        }
    };
    if !is_uuid(&uuid) {
        p.bad("uuid", format!("{uuid:?} is not a uuid"));
        return None;
    }
    let exists = kind.map(db).contains_key(&uuid);
    if adding && exists {
        p.duplicate(
            "uuid",
            format!("a {} with uuid {uuid} exists", kind.noun()),
            &uuid,
        );
    } else if !adding && !exists {
        p.bad("uuid", format!("no {} with uuid {uuid}", kind.noun()));
        return None;
    }
    Some(uuid)
}

/// A `name` (or `hostname`) that must be set, valid and unique among `kind`.
fn unique_name(
    kind: Kind,
    db: &Db,
    obj: &Obj,
    field: &str,
    uuid: Option<&str>,
    p: &mut Problems,
) -> String {
    let name = string_or(obj, field, "", p);
    if name.is_empty() {
        p.null(field);
    } else if !valid_name(&name) {
        p.bad(
            field,
            format!("{field} {name:?} must be 1-63 letters, digits, '-', '.' or '_'"),
        );
    } else if let Some((other, _)) = kind
        .map(db)
        .iter()
        .find(|(u, o)| Some(u.as_str()) != uuid && str_field(o, field).eq_ignore_ascii_case(&name))
    {
        p.duplicate(field, format!("{field} {name} is in use by {other}"), other);
    }
    name
}

/// The revision check of an update.
fn check_revision(stored: &Obj, obj: &Obj, p: &mut Problems) {
    match get(obj, "revision") {
        None => {}
        Some(Value::String(r)) if r.is_empty() => {}
        Some(Value::String(r)) => {
            let have = str_field(stored, "revision");
            if r != have {
                p.bad(
                    "revision",
                    format!("revision mismatch: sent {r}, stored {have}; read the object again"),
                );
            }
        }
        Some(_) => p.bad("revision", "revision must be a string"),
    }
}

fn as_object<'a>(arg: &'a Value, what: &str) -> Result<&'a Obj, CallError> {
    arg.as_object()
        .ok_or_else(|| CallError::Message(format!("{what}: the argument must be an object")))
}

fn device(db: &Db, obj: &Obj, adding: bool) -> Result<(String, Obj), CallError> {
    let mut p = Problems::default();
    let uuid = entity_uuid(Kind::Device, db, obj, adding, &mut p);
    let mut d = obj.clone();
    if let Some(t) = get(obj, "baseType")
        && t != "Device"
    {
        p.bad("baseType", "baseType must be Device");
    }
    d.insert("baseType".into(), json!("Device"));
    let child = string_or(obj, "childType", "PhysicalNode", &mut p);
    d.insert("childType".into(), json!(child));
    let hostname = unique_name(Kind::Device, db, obj, "hostname", uuid.as_deref(), &mut p);
    d.insert("hostname".into(), json!(hostname));

    let mac = string_or(obj, "mac", ZERO_MAC, &mut p);
    let mac = if mac.is_empty() { ZERO_MAC.into() } else { mac };
    if !valid_mac(&mac) {
        p.bad("mac", format!("mac {mac:?} is not a MAC address"));
    } else if mac != ZERO_MAC
        && let Some((other, _)) = db.devices.iter().find(|(u, o)| {
            Some(u.as_str()) != uuid.as_deref() && str_field(o, "mac").eq_ignore_ascii_case(&mac)
        })
    {
        p.duplicate("mac", format!("mac {mac} is in use by {other}"), other);
    }
    d.insert("mac".into(), json!(mac));

    let category = string_or(obj, "category", "", &mut p);
    if category.is_empty() || category == ZERO_UUID {
        p.null("category");
    } else if !db.categories.contains_key(&category) {
        p.bad("category", format!("no category with uuid {category}"));
    }
    d.insert("category".into(), json!(category));
    d.insert("softwareImageProxy".into(), image_proxy(db, obj, &mut p));
    let mode = install_mode(obj, "installMode", "", &mut p);
    d.insert("installMode".into(), json!(mode));
    let next = install_mode(obj, "nextBootInstallMode", "", &mut p);
    d.insert("nextBootInstallMode".into(), json!(next));

    let cleared = match get(obj, "blockDevicesClearedOnNextBoot") {
        None => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(|v| v.as_str().is_some_and(|s| !s.is_empty())) => {
            a.clone()
        }
        Some(_) => {
            p.bad(
                "blockDevicesClearedOnNextBoot",
                "blockDevicesClearedOnNextBoot must be a list of device paths",
            );
            Vec::new()
        }
    };
    d.insert(
        "blockDevicesClearedOnNextBoot".into(),
        Value::Array(cleared),
    );
    d.insert(
        "interfaces".into(),
        Value::Array(interfaces(db, obj, uuid.as_deref(), &mut p)),
    );
    let loader = string_or(obj, "bootLoader", "CATEGORY", &mut p);
    d.insert(
        "bootLoader".into(),
        json!(if loader.is_empty() {
            "CATEGORY".into()
        } else {
            loader
        }),
    );
    let rack = match get(obj, "rackPosition") {
        None => json!({"rack": "", "position": 0}),
        Some(Value::Object(m))
            if get(m, "rack").is_none_or(Value::is_string)
                && get(m, "position").is_none_or(|v| v.as_u64().is_some()) =>
        {
            let mut m = m.clone();
            m.entry("rack").or_insert(json!(""));
            m.entry("position").or_insert(json!(0));
            Value::Object(m)
        }
        Some(_) => {
            p.bad(
                "rackPosition",
                "rackPosition must be {rack: string, position: non-negative integer}",
            );
            json!({"rack": "", "position": 0})
        }
    };
    d.insert("rackPosition".into(), rack);
    let extra = match get(obj, "extra_values") {
        None => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            p.bad("extra_values", "extra_values must be a JSON object");
            json!({})
        }
    };
    d.insert("extra_values".into(), extra);
    if !adding && let Some(stored) = uuid.as_deref().and_then(|u| db.devices.get(u)) {
        check_revision(stored, obj, &mut p);
    }
    match uuid {
        Some(u) if p.0.is_empty() => Ok((u, d)),
        _ => Err(CallError::Refused(p.0)),
    }
}

fn interfaces(db: &Db, obj: &Obj, uuid: Option<&str>, p: &mut Problems) -> Vec<Value> {
    let list = match get(obj, "interfaces") {
        None => return Vec::new(),
        Some(Value::Array(a)) => a,
        Some(_) => {
            p.bad(
                "interfaces",
                "interfaces must be a list of interface objects",
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(list.len());
    let mut names = std::collections::HashSet::new();
    for (i, item) in list.iter().enumerate() {
        let Some(m) = item.as_object() else {
            p.bad("interfaces", format!("interfaces[{i}] must be an object"));
            continue;
        };
        let mut m = m.clone();
        let mut sub = Problems::default();
        let name = string_or(&m, "name", "", &mut sub);
        if name.is_empty() {
            p.0.push(Validation::error(
                "interfaces",
                "NOT_NULL",
                format!("interfaces[{i}].name must be set"),
            ));
        } else if !names.insert(name.clone()) {
            p.duplicate(
                "interfaces",
                format!("interface {name} appears twice"),
                uuid.unwrap_or(ZERO_UUID),
            );
        }
        let child = string_or(&m, "childType", "NetworkPhysicalInterface", &mut sub);
        let mac = string_or(&m, "mac", ZERO_MAC, &mut sub);
        let mac = if mac.is_empty() { ZERO_MAC.into() } else { mac };
        if !valid_mac(&mac) {
            sub.bad(
                "interfaces",
                format!("interfaces[{i}].mac {mac:?} is not a MAC"),
            );
        }
        let ip = string_or(&m, "ip", "0.0.0.0", &mut sub);
        let ip = if ip.is_empty() { "0.0.0.0".into() } else { ip };
        if ip.parse::<Ipv4Addr>().is_err() {
            sub.bad(
                "interfaces",
                format!("interfaces[{i}].ip {ip:?} is not an IPv4 address"),
            );
        } else if ip != "0.0.0.0"
            && let Some((other, _)) = db.devices.iter().find(|(u, d)| {
                Some(u.as_str()) != uuid
                    && d.get("interfaces")
                        .and_then(Value::as_array)
                        .is_some_and(|l| l.iter().any(|f| f.get("ip") == Some(&json!(ip))))
            })
        {
            p.duplicate("interfaces", format!("ip {ip} is in use by {other}"), other);
        }
        let network = string_or(&m, "network", "", &mut sub);
        for v in sub.0 {
            p.0.push(Validation {
                field: "interfaces".into(),
                ..v
            });
        }
        m.insert("childType".into(), json!(child));
        m.insert("name".into(), json!(name));
        m.insert("mac".into(), json!(mac));
        m.insert("ip".into(), json!(ip));
        m.insert("network".into(), json!(network));
        out.push(Value::Object(m));
    }
    out
}

fn category(db: &Db, obj: &Obj, adding: bool) -> Result<(String, Obj), CallError> {
    let mut p = Problems::default();
    let uuid = entity_uuid(Kind::Category, db, obj, adding, &mut p);
    let mut c = obj.clone();
    c.insert("baseType".into(), json!("Category"));
    c.insert("childType".into(), json!("Category"));
    let name = unique_name(Kind::Category, db, obj, "name", uuid.as_deref(), &mut p);
    c.insert("name".into(), json!(name));
    c.insert("softwareImageProxy".into(), image_proxy(db, obj, &mut p));
    let mode = install_mode(obj, "installMode", "AUTO", &mut p);
    c.insert("installMode".into(), json!(mode));
    if !adding && let Some(stored) = uuid.as_deref().and_then(|u| db.categories.get(u)) {
        check_revision(stored, obj, &mut p);
    }
    match uuid {
        Some(u) if p.0.is_empty() => Ok((u, c)),
        _ => Err(CallError::Refused(p.0)),
    }
}

fn image(db: &Db, obj: &Obj, adding: bool) -> Result<(String, Obj), CallError> {
    let mut p = Problems::default();
    let uuid = entity_uuid(Kind::Image, db, obj, adding, &mut p);
    let mut i = obj.clone();
    i.insert("baseType".into(), json!("SoftwareImage"));
    i.insert("childType".into(), json!("SoftwareImage"));
    let name = unique_name(Kind::Image, db, obj, "name", uuid.as_deref(), &mut p);
    let path = string_or(obj, "path", "", &mut p);
    let path = if path.is_empty() {
        format!("/cm/images/{name}")
    } else {
        path
    };
    let kernel = string_or(obj, "kernelVersion", "", &mut p);
    i.insert("name".into(), json!(name));
    i.insert("path".into(), json!(path));
    i.insert("kernelVersion".into(), json!(kernel));
    if !adding && let Some(stored) = uuid.as_deref().and_then(|u| db.images.get(u)) {
        check_revision(stored, obj, &mut p);
    }
    match uuid {
        Some(u) if p.0.is_empty() => Ok((u, i)),
        _ => Err(CallError::Refused(p.0)),
    }
}

/// `add<Kind>(object, force)` or `update<Kind>(object, force)`.
///
/// # Errors
/// [`CallError::Refused`] with every problem, or [`CallError::Message`] when the
/// argument is not an object.
pub fn commit(db: &mut Db, kind: Kind, arg: &Value, adding: bool) -> Result<(), CallError> {
    let what = if adding { "add" } else { "update" };
    let obj = as_object(arg, &format!("{what} {}", kind.noun()))?;
    let (uuid, mut entity) = match kind {
        Kind::Device => device(db, obj, adding)?,
        Kind::Category => category(db, obj, adding)?,
        Kind::Image => image(db, obj, adding)?,
    };
    if !adding
        && kind.map(db).get(&uuid).is_some_and(|stored| {
            let mut same = entity.clone();
            same.insert(
                "revision".into(),
                stored.get("revision").cloned().unwrap_or(Value::Null),
            );
            &same == stored
        })
    {
        // Nothing changed: the revision stays.
        return Ok(());
    }
    let rev = db.next_revision();
    entity.insert("revision".into(), json!(rev));
    if kind == Kind::Device && adding {
        db.nodes
            .insert(uuid.clone(), super::model::NodeState::idle(false, &[]));
    }
    kind.map_mut(db).insert(uuid, entity);
    Ok(())
}

/// `remove<Kind>(uuid-or-name | [uuids…], force)`.
///
/// # Errors
/// [`CallError::Refused`] for an unknown or still-used entity, [`CallError::Message`]
/// for a malformed argument.
pub fn remove(db: &mut Db, kind: Kind, arg: &Value) -> Result<(), CallError> {
    let keys: Vec<&str> = match arg {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) if a.iter().all(Value::is_string) => {
            a.iter().filter_map(Value::as_str).collect()
        }
        _ => {
            return Err(CallError::Message(format!(
                "remove {}: the argument must be a uuid or a list of uuids",
                kind.noun()
            )));
        }
    };
    let mut p = Problems::default();
    let mut uuids = Vec::new();
    for key in keys {
        let found = match kind {
            Kind::Device => db.find_device(key),
            Kind::Category => db.find_category(key),
            Kind::Image => db.find_image(key),
        };
        let Some((uuid, _)) = found else {
            p.bad("uuid", format!("no {} {key}", kind.noun()));
            continue;
        };
        let uuid = uuid.clone();
        let users: Vec<&String> = match kind {
            Kind::Device => Vec::new(),
            Kind::Category => db
                .devices
                .iter()
                .filter(|(_, d)| str_field(d, "category") == uuid)
                .map(|(u, _)| u)
                .collect(),
            Kind::Image => db
                .devices
                .iter()
                .chain(db.categories.iter())
                .filter(|(_, o)| {
                    o.get("softwareImageProxy")
                        .and_then(|s| s.get("parentSoftwareImage"))
                        == Some(&json!(uuid))
                })
                .map(|(u, _)| u)
                .collect(),
        };
        if let Some(user) = users.first() {
            p.0.push(
                Validation::error(
                    "uuid",
                    "BAD_VALUE",
                    format!(
                        "{} {uuid} is in use by {} entities",
                        kind.noun(),
                        users.len()
                    ),
                )
                .about(user),
            );
            continue;
        }
        uuids.push(uuid);
    }
    if !p.0.is_empty() {
        return Err(CallError::Refused(p.0));
    }
    for uuid in uuids {
        kind.map_mut(db).remove(&uuid);
        db.nodes.remove(&uuid);
    }
    Ok(())
}
