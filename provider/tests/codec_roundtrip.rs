//! Round-trip, byte-vector and robustness tests of the wire codecs.
//!
//! The byte vectors are go-cty's encodings as terraform-plugin-go pins them in
//! `tftypes/value_msgpack_test.go`; the property tests check that whatever the encoders write
//! decodes to the same value, and that no input makes a decoder panic.

use std::collections::BTreeMap;

use bigdecimal::{BigDecimal, num_bigint::BigInt};
use gpufleet_engine::value::{NumberBound, Refinements, Type, Value};
use proptest::prelude::*;
use proptest::strategy::Union;
use terraform_provider_gpufleet::codec::{
    CodecError, infer_type, json, msgpack, type_from_json_bytes, type_to_json_bytes,
};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit pair"))
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn num(text: &str) -> BigDecimal {
    text.parse().expect("decimal")
}

/// The exact decimal value of a float: `{:e}` with enough digits prints every digit exactly.
fn exact(f: f64) -> BigDecimal {
    num(&format!("{f:.1100e}"))
}

fn number(text: &str) -> Value {
    Value::Number(num(text))
}

fn dynamic(ty: Type, value: Value) -> Value {
    Value::Dynamic(Box::new((ty, value)))
}

fn refined(refinements: Refinements) -> Value {
    Value::Unknown(Box::new(refinements))
}

fn not_null() -> Refinements {
    Refinements {
        not_null: true,
        ..Refinements::default()
    }
}

fn bound(value: BigDecimal, inclusive: bool) -> Option<NumberBound> {
    Some(NumberBound { value, inclusive })
}

/// Checks that `value` encodes to exactly `hex_bytes` and that those bytes decode to `value`.
fn assert_vector(name: &str, hex_bytes: &str, ty: &Type, value: &Value) {
    let encoded = msgpack::encode(value, ty).unwrap_or_else(|e| panic!("{name}: encode: {e}"));
    assert_eq!(to_hex(&encoded), hex_bytes, "{name}: encoding");
    let decoded =
        msgpack::decode(&hex(hex_bytes), ty).unwrap_or_else(|e| panic!("{name}: decode: {e}"));
    assert_eq!(&decoded, value, "{name}: decoding");
}

// ---------------------------------------------------------------------------------------------
// go-cty byte vectors
// ---------------------------------------------------------------------------------------------

#[test]
fn primitive_vectors() {
    let hello = Value::string("hello");
    let big_number = format!("d964{}", "39".repeat(100));
    let cases: Vec<(&str, &str, Type, Value)> = vec![
        ("hello-string", "a568656c6c6f", Type::String, hello.clone()),
        ("empty-string", "a0", Type::String, Value::string("")),
        ("null-string", "c0", Type::String, Value::Null),
        ("unknown-string", "d40000", Type::String, Value::unknown()),
        ("true-bool", "c3", Type::Bool, Value::Bool(true)),
        ("false-bool", "c2", Type::Bool, Value::Bool(false)),
        ("unknown-bool", "d40000", Type::Bool, Value::unknown()),
        ("int-number", "01", Type::Number, Value::int(1)),
        (
            "int64-positive-number",
            "cf7fffffffffffffff",
            Type::Number,
            Value::int(i64::MAX),
        ),
        (
            "int64-negative-number",
            "d38000000000000000",
            Type::Number,
            Value::int(i64::MIN),
        ),
        // Beyond i64 and not an exact float64: a decimal string, as go-cty writes it.
        (
            "uint64-number",
            "b43138343436373434303733373039353531363135",
            Type::Number,
            Value::Number(BigDecimal::from(u64::MAX)),
        ),
        (
            "float-number",
            "cb3ff8000000000000",
            Type::Number,
            number("1.5"),
        ),
        (
            "float64-max",
            "cb7fefffffffffffff",
            Type::Number,
            Value::Number(exact(f64::MAX)),
        ),
        (
            "float64-smallest-subnormal",
            "cb0000000000000001",
            Type::Number,
            Value::Number(exact(f64::from_bits(1))),
        ),
        (
            "big-number",
            &big_number,
            Type::Number,
            number(&"9".repeat(100)),
        ),
        // 0.8 has no exact binary form, so it must travel as a string.
        (
            "awkward-fraction-number",
            "a3302e38",
            Type::Number,
            number("0.8"),
        ),
    ];
    for (name, bytes, ty, value) in &cases {
        assert_vector(name, bytes, ty, value);
    }
}

#[test]
fn collection_vectors() {
    let hello = Value::string("hello");
    let greeting = |v: Value| Value::object([("greeting", v)]);
    let greeting_ty = |t: Type| Type::object([("greeting", t)]);
    let cases: Vec<(&str, &str, Type, Value)> = vec![
        (
            "list-string-hello",
            "91a568656c6c6f",
            Type::list(Type::String),
            Value::List(vec![hello.clone()]),
        ),
        (
            "list-string-unknown",
            "91d40000",
            Type::list(Type::String),
            Value::List(vec![Value::unknown()]),
        ),
        (
            "list-string-null-string",
            "91c0",
            Type::list(Type::String),
            Value::List(vec![Value::Null]),
        ),
        (
            "list-string-null",
            "c0",
            Type::list(Type::String),
            Value::Null,
        ),
        (
            "list-string-empty",
            "90",
            Type::list(Type::String),
            Value::List(vec![]),
        ),
        (
            "set-string-hello",
            "91a568656c6c6f",
            Type::set(Type::String),
            Value::set(vec![hello.clone()]),
        ),
        (
            "set-string-empty",
            "90",
            Type::set(Type::String),
            Value::set(vec![]),
        ),
        (
            "map-string-hello",
            "81a86772656574696e67a568656c6c6f",
            Type::map(Type::String),
            Value::Map(BTreeMap::from([("greeting".to_owned(), hello.clone())])),
        ),
        (
            "map-string-unknown",
            "81a86772656574696e67d40000",
            Type::map(Type::String),
            Value::Map(BTreeMap::from([("greeting".to_owned(), Value::unknown())])),
        ),
        (
            "map-string-empty",
            "80",
            Type::map(Type::String),
            Value::Map(BTreeMap::new()),
        ),
        (
            "tuple-string-hello",
            "91a568656c6c6f",
            Type::Tuple(vec![Type::String]),
            Value::Tuple(vec![hello.clone()]),
        ),
        (
            "tuple-empty",
            "90",
            Type::Tuple(vec![]),
            Value::Tuple(vec![]),
        ),
        (
            "object-string-hello",
            "81a86772656574696e67a568656c6c6f",
            greeting_ty(Type::String),
            greeting(hello.clone()),
        ),
        (
            "object-string-null",
            "81a86772656574696e67c0",
            greeting_ty(Type::String),
            greeting(Value::Null),
        ),
        (
            "object-string-multi-unknown",
            "82a161d40000a162d40000",
            Type::object([("a", Type::String), ("b", Type::String)]),
            Value::object([("a", Value::unknown()), ("b", Value::unknown())]),
        ),
        (
            "object-empty",
            "80",
            Type::object::<_, String>([]),
            Value::object::<_, String>([]),
        ),
    ];
    for (name, bytes, ty, value) in &cases {
        assert_vector(name, bytes, ty, value);
    }
}

#[test]
fn dynamic_vectors() {
    let hello = Value::string("hello");
    let cases: Vec<(&str, &str, Type, Value)> = vec![
        (
            "dynamic-bool",
            "92c40622626f6f6c22c3",
            Type::Dynamic,
            dynamic(Type::Bool, Value::Bool(true)),
        ),
        (
            "dynamic-number",
            "92c408226e756d6265722201",
            Type::Dynamic,
            dynamic(Type::Number, Value::int(1)),
        ),
        (
            "dynamic-string",
            "92c40822737472696e6722a568656c6c6f",
            Type::Dynamic,
            dynamic(Type::String, hello.clone()),
        ),
        (
            "dynamic-list",
            "92c4115b226c697374222c22737472696e67225d91a568656c6c6f",
            Type::Dynamic,
            dynamic(Type::list(Type::String), Value::List(vec![hello.clone()])),
        ),
        (
            "dynamic-map",
            "92c4105b226d6170222c22737472696e67225d81a568656c6c6fa568656c6c6f",
            Type::Dynamic,
            dynamic(
                Type::map(Type::String),
                Value::Map(BTreeMap::from([("hello".to_owned(), hello.clone())])),
            ),
        ),
        (
            "dynamic-set",
            "92c4105b22736574222c22737472696e67225d91a568656c6c6f",
            Type::Dynamic,
            dynamic(Type::set(Type::String), Value::set(vec![hello.clone()])),
        ),
        (
            "object-dynamic",
            "81a86772656574696e6792c40822737472696e6722a568656c6c6f",
            Type::object([("greeting", Type::Dynamic)]),
            Value::object([("greeting", dynamic(Type::String, hello.clone()))]),
        ),
        (
            "tuple-dynamic",
            "9292c40822737472696e6722a568656c6c6f92c40822737472696e6722a5776f726c64",
            Type::Tuple(vec![Type::Dynamic, Type::Dynamic]),
            Value::Tuple(vec![
                dynamic(Type::String, hello.clone()),
                dynamic(Type::String, Value::string("world")),
            ]),
        ),
        // A typed null keeps its type; an untyped one is bare nil.
        (
            "string-dynamic-null",
            "92c40822737472696e6722c0",
            Type::Dynamic,
            dynamic(Type::String, Value::Null),
        ),
        ("dynamic-null", "c0", Type::Dynamic, Value::Null),
        (
            "object-dynamic-null",
            "81a161c0",
            Type::object([("a", Type::Dynamic)]),
            Value::object([("a", Value::Null)]),
        ),
        ("dynamic-unknown", "d40000", Type::Dynamic, Value::unknown()),
        (
            "dynamic-list-unknown",
            "91d40000",
            Type::list(Type::Dynamic),
            Value::List(vec![Value::unknown()]),
        ),
    ];
    for (name, bytes, ty, value) in &cases {
        assert_vector(name, bytes, ty, value);
    }
}

#[test]
fn refined_unknown_vectors() {
    let list_bounds = Refinements {
        length_lower: Some(1),
        length_upper: Some(5),
        ..not_null()
    };
    let set_bounds = Refinements {
        length_lower: Some(2),
        length_upper: Some(6),
        ..not_null()
    };
    let cases: Vec<(&str, &str, Type, Value)> = vec![
        (
            "unknown-bool-with-nullness-refinement",
            "c7030c8101c2",
            Type::Bool,
            refined(not_null()),
        ),
        (
            "unknown-object-with-nullness-refinement",
            "c7030c8101c2",
            Type::object([("attr", Type::String)]),
            refined(not_null()),
        ),
        (
            "unknown-string-with-prefix-refinement",
            "c70e0c8201c202a97072656669783a2f2f",
            Type::String,
            refined(Refinements {
                string_prefix: Some("prefix://".to_owned()),
                ..not_null()
            }),
        ),
        (
            "unknown-number-with-bound-refinements-integers-inclusive",
            "c70b0c8301c2039201c3049205c3",
            Type::Number,
            refined(Refinements {
                number_lower: bound(num("1"), true),
                number_upper: bound(num("5"), true),
                ..not_null()
            }),
        ),
        (
            "unknown-number-with-bound-refinements-integers-exclusive",
            "c70b0c8301c2039201c2049205c2",
            Type::Number,
            refined(Refinements {
                number_lower: bound(num("1"), false),
                number_upper: bound(num("5"), false),
                ..not_null()
            }),
        ),
        (
            "unknown-number-with-bound-refinements-float-inclusive",
            "c71b0c8301c20392cb3ff3ae147ae147aec30492cb4016ae147ae147aec3",
            Type::Number,
            refined(Refinements {
                number_lower: bound(exact(1.23), true),
                number_upper: bound(exact(5.67), true),
                ..not_null()
            }),
        ),
        (
            "unknown-list-with-bound-refinements",
            "c7070c8301c205010605",
            Type::list(Type::String),
            refined(list_bounds),
        ),
        (
            "unknown-set-with-bound-refinements",
            "c7070c8301c205020606",
            Type::set(Type::Bool),
            refined(set_bounds),
        ),
        // A number that needs a string, inside a bound.
        (
            "unknown-number-with-decimal-string-bound",
            // Eight bytes of refinements: fixext8, as go-cty's encoder picks it too.
            "d70c810392a3302e38c2",
            Type::Number,
            refined(Refinements {
                number_lower: bound(num("0.8"), false),
                ..Refinements::default()
            }),
        ),
    ];
    for (name, bytes, ty, value) in &cases {
        assert_vector(name, bytes, ty, value);
    }
}

#[test]
fn refinements_that_do_not_apply_are_dropped_on_encode() {
    // A prefix on a bool, a length on a string, or anything in a dynamic position: go-cty
    // writes the plain unknown.
    let junk = Refinements {
        string_prefix: Some("ignored".to_owned()),
        length_lower: Some(3),
        number_upper: bound(num("1"), true),
        ..Refinements::default()
    };
    for ty in [Type::Bool, Type::object([("a", Type::String)])] {
        let bytes = msgpack::encode(&refined(junk.clone()), &ty).expect("encode");
        assert_eq!(bytes, [0xd4, 0, 0]);
    }
    let bytes = msgpack::encode(&refined(not_null()), &Type::Dynamic).expect("encode");
    assert_eq!(bytes, [0xd4, 0, 0], "dynamic unknowns are never refined");
    // An empty prefix and a zero lower bound carry no information.
    let empty = Refinements {
        string_prefix: Some(String::new()),
        ..Refinements::default()
    };
    assert_eq!(
        msgpack::encode(&refined(empty), &Type::String).expect("encode"),
        [0xd4, 0, 0]
    );
    let zero = Refinements {
        length_lower: Some(0),
        ..Refinements::default()
    };
    assert_eq!(
        msgpack::encode(&refined(zero), &Type::list(Type::String)).expect("encode"),
        [0xd4, 0, 0]
    );
}

#[test]
fn refinement_decoding_edge_cases() {
    // terraform-plugin-go writes a zero lower bound; it means nothing.
    let value =
        msgpack::decode(&hex("c7070c8301c205000604"), &Type::map(Type::Number)).expect("decode");
    assert_eq!(
        value,
        refined(Refinements {
            length_upper: Some(4),
            ..not_null()
        })
    );
    // Refined unknowns in a dynamic position lose their refinements, as in go-cty.
    let value = msgpack::decode(&hex("c7030c8101c2"), &Type::Dynamic).expect("decode");
    assert_eq!(value, Value::unknown());
    // Any extension type is an unknown value.
    for bytes in ["d40500", "d50a0000", "c7000c", "c70205ffff"] {
        let value = msgpack::decode(&hex(bytes), &Type::String).expect("decode");
        assert_eq!(value, Value::unknown(), "{bytes}");
    }
    // "Definitely null" collapses to a known null, as go-cty's refinement builder does.
    let value = msgpack::decode(&hex("c7030c8101c3"), &Type::String).expect("decode");
    assert_eq!(value, Value::Null);
    // A prefix refinement on a number is inconsistent, as go-cty says too.
    let err = msgpack::decode(&hex("c7040c8102a161"), &Type::Number).expect_err("mismatch");
    assert!(matches!(err, CodecError::DecodeRefinements { .. }), "{err}");
    // Oversize refinements are refused (go-cty's 1 KiB limit).
    let mut big = hex("c80401 0c".replace(' ', "").as_str());
    big.extend(std::iter::repeat_n(0x80, 0x401));
    assert!(msgpack::decode(&big, &Type::String).is_err());
}

#[test]
fn long_prefixes_are_capped_like_go_cty() {
    let long = "prefix://".to_owned() + &"0123456789-".repeat(30);
    let value = refined(Refinements {
        string_prefix: Some(long.clone()),
        ..not_null()
    });
    let bytes = msgpack::encode(&value, &Type::String).expect("encode");
    let decoded = msgpack::decode(&bytes, &Type::String).expect("decode");
    let Value::Unknown(refinements) = decoded else {
        panic!("not unknown: {decoded:?}");
    };
    let prefix = refinements.string_prefix.expect("prefix");
    // Cut to 255 bytes, then the last character goes (go-cty's SafeKnownPrefix).
    assert_eq!(prefix, long[..254]);
    // Multi-byte text is cut on a character boundary.
    let wide = "é".repeat(200);
    let value = refined(Refinements {
        string_prefix: Some(wide.clone()),
        ..Refinements::default()
    });
    let bytes = msgpack::encode(&value, &Type::String).expect("encode");
    let Value::Unknown(refinements) = msgpack::decode(&bytes, &Type::String).expect("decode")
    else {
        panic!("not unknown");
    };
    let prefix = refinements.string_prefix.expect("prefix");
    assert!(wide.starts_with(&prefix) && prefix.len() <= 255, "{prefix}");
}

#[test]
fn numbers_beyond_float_precision_travel_as_strings() {
    for (text, wire) in [
        (
            "100000000000000000000000000007",
            "100000000000000000000000000007",
        ),
        (
            "-100000000000000000000000000007",
            "-100000000000000000000000000007",
        ),
        (
            "0.1000000000000000000000000001",
            "0.1000000000000000000000000001",
        ),
        ("1e300", &format!("1{}", "0".repeat(300))),
        ("-0.000001", "-0.000001"),
    ] {
        let value = number(text);
        let bytes = msgpack::encode(&value, &Type::Number).expect("encode");
        let decoded = msgpack::decode(&bytes, &Type::Number).expect("decode");
        assert_eq!(decoded, value, "{text}");
        // Skip the str marker and length: what is left is the decimal text.
        let body = String::from_utf8_lossy(&bytes);
        assert!(body.ends_with(wire), "{text}: {}", to_hex(&bytes));
    }
    // 2^64 is exactly a float64, so go-cty writes it as one.
    let two64 = Value::Number(BigDecimal::from(BigInt::from(1u128 << 64)));
    let bytes = msgpack::encode(&two64, &Type::Number).expect("encode");
    assert_eq!(to_hex(&bytes), "cb43f0000000000000");
    // Every integer and float width decodes.
    for (bytes, want) in [
        ("cc80", "128"),
        ("cd0100", "256"),
        ("ce00010000", "65536"),
        ("cfffffffffffffffff", "18446744073709551615"),
        ("d0e0", "-32"),
        ("d1ff7f", "-129"),
        ("d2ffff7fff", "-32769"),
        ("ca3fc00000", "1.5"),
        ("a4312e3530", "1.5"),
        ("c403312e35", "1.5"),
        ("a3316533", "1000"),
    ] {
        let got = msgpack::decode(&hex(bytes), &Type::Number).expect(bytes);
        assert_eq!(got, number(want), "{bytes}");
    }
    // Infinities and NaN have no decimal value.
    for bytes in [
        "cb7ff0000000000000",
        "cbfff0000000000000",
        "cb7ff8000000000000",
    ] {
        let err = msgpack::decode(&hex(bytes), &Type::Number).expect_err(bytes);
        assert!(matches!(err, CodecError::DecodeNumber { .. }), "{err}");
    }
}

#[test]
fn dynamic_positions_accept_type_json_as_string_and_infer_types() {
    // The type as a msgpack str rather than bin.
    let value =
        msgpack::decode(&hex("92a822737472696e6722a568656c6c6f"), &Type::Dynamic).expect("decode");
    assert_eq!(value, dynamic(Type::String, Value::string("hello")));
    // A plain value at a dynamic position travels with its inferred type.
    let plain = Value::object([
        ("n", Value::int(1)),
        ("l", Value::List(vec![Value::Null, Value::string("x")])),
    ]);
    let bytes = msgpack::encode(&plain, &Type::Dynamic).expect("encode");
    let decoded = msgpack::decode(&bytes, &Type::Dynamic).expect("decode");
    let ty = Type::object([("n", Type::Number), ("l", Type::list(Type::String))]);
    assert_eq!(infer_type(&plain), ty);
    assert_eq!(decoded, dynamic(ty, plain));
    // A dynamic value at a concretely typed position is unwrapped.
    let wrapped = dynamic(Type::String, Value::string("x"));
    assert_eq!(
        msgpack::encode(&wrapped, &Type::String).expect("encode"),
        hex("a178")
    );
}

#[test]
fn inferred_types_survive_conflicting_siblings() {
    // Found by the property tests: a conflict between siblings must stay dynamic even when a
    // later sibling matches one side of it.
    let plain = Value::Map(BTreeMap::from([(
        String::new(),
        Value::set(vec![
            dynamic(Type::list(Type::set(Type::Number)), Value::List(vec![])),
            dynamic(Type::set(Type::String), Value::Null),
            dynamic(Type::set(Type::Number), Value::set(vec![])),
        ]),
    )]));
    assert_eq!(infer_type(&plain), Type::map(Type::set(Type::Dynamic)));
    let bytes = msgpack::encode(&plain, &Type::Dynamic).expect("encode");
    let decoded = msgpack::decode(&bytes, &Type::Dynamic).expect("decode");
    assert_eq!(decoded, dynamic(Type::map(Type::set(Type::Dynamic)), plain));
}

#[test]
fn objects_must_match_their_type() {
    let ty = Type::object([("a", Type::String), ("b", Type::String)]);
    // Missing "b".
    let err = msgpack::decode(&hex("81a161a178"), &ty).expect_err("missing");
    assert_eq!(
        err.to_string(),
        "failed to decode object at (root): missing attribute \"b\""
    );
    // Extra "c", inside a list so the path shows.
    let list_ty = Type::list(ty.clone());
    let err = msgpack::decode(&hex("9183a161c0a162c0a163c0"), &list_ty).expect_err("extra");
    assert_eq!(
        err.to_string(),
        "failed to decode object at [0]: unsupported attribute \"c\""
    );
    // Duplicate "a" cannot stand in for "b".
    assert!(msgpack::decode(&hex("82a161c0a161c0"), &ty).is_err());
    // Wrong kind of value, with the attribute path.
    let err = msgpack::decode(&hex("82a16101a162c0"), &ty).expect_err("kind");
    assert_eq!(
        err.to_string(),
        "failed to decode string at a: found a msgpack integer"
    );
    // Encoding checks the same.
    let err = msgpack::encode(&Value::object([("a", Value::Null)]), &ty).expect_err("encode");
    assert_eq!(
        err.to_string(),
        "failed to encode object at (root): missing attribute \"b\""
    );
    let bad = Value::object([("a", Value::int(1)), ("b", Value::Null)]);
    let err = json::encode(&bad, &ty).expect_err("encode");
    assert_eq!(
        err.to_string(),
        "failed to encode value at a: expected string, found a number"
    );
}

#[test]
fn empty_and_trailing_input_are_errors() {
    assert!(matches!(
        msgpack::decode(&[], &Type::String),
        Err(CodecError::DecodeEmpty)
    ));
    assert!(matches!(
        msgpack::decode(&hex("c0c0"), &Type::String),
        Err(CodecError::DecodeTrailing { count: 1 })
    ));
    assert!(matches!(
        json::decode(b"", &Type::String),
        Err(CodecError::DecodeEmpty)
    ));
}

#[test]
fn json_matches_go_cty() {
    let ty = Type::object([
        ("name", Type::String),
        ("count", Type::Number),
        ("tags", Type::map(Type::String)),
        ("any", Type::Dynamic),
        ("ids", Type::set(Type::Number)),
    ]);
    let value = Value::object([
        ("name", Value::string("a")),
        ("count", number("100000000000000000000000000007")),
        (
            "tags",
            Value::Map(BTreeMap::from([("k".to_owned(), Value::string("v"))])),
        ),
        (
            "any",
            dynamic(Type::list(Type::Bool), Value::List(vec![Value::Bool(true)])),
        ),
        ("ids", Value::set(vec![number("2.5"), number("-1")])),
    ]);
    let bytes = json::encode(&value, &ty).expect("encode");
    assert_eq!(
        String::from_utf8(bytes.clone()).expect("utf-8"),
        r#"{"any":{"value":[true],"type":["list","bool"]},"count":100000000000000000000000000007,"ids":[-1,2.5],"name":"a","tags":{"k":"v"}}"#
    );
    assert_eq!(json::decode(&bytes, &ty).expect("decode"), value);
    // The serde_json::Value variants agree with the byte ones.
    let tree = json::encode_value(&value, &ty).expect("encode");
    assert_eq!(json::decode_value(&tree, &ty).expect("decode"), value);
    // Typed null at a dynamic position, and a bare null.
    let typed_null = dynamic(Type::String, Value::Null);
    let bytes = json::encode(&typed_null, &Type::Dynamic).expect("encode");
    assert_eq!(bytes, br#"{"value":null,"type":"string"}"#);
    assert_eq!(
        json::decode(&bytes, &Type::Dynamic).expect("decode"),
        typed_null
    );
    assert_eq!(
        json::decode(b"null", &Type::Dynamic).expect("decode"),
        Value::Null
    );
}

#[test]
fn raw_state_is_decoded_leniently() {
    let ty = Type::object([
        ("id", Type::String),
        ("added_later", Type::list(Type::String)),
    ]);
    let raw = br#"{"id":"x","removed_attr":{"deep":[1,2]}}"#;
    let value = json::decode_lenient_object(raw, &ty).expect("decode");
    assert_eq!(
        value,
        Value::object([("id", Value::string("x")), ("added_later", Value::Null)])
    );
    let tree: serde_json::Value = serde_json::from_slice(raw).expect("json");
    assert_eq!(
        json::decode_lenient_object_value(&tree, &ty).expect("decode"),
        value
    );
    let err = json::decode(raw, &ty).expect_err("strict");
    assert!(matches!(err, CodecError::DecodeObject { .. }), "{err}");
}

#[test]
fn type_json_round_trips() {
    let ty = Type::object([
        ("a", Type::Tuple(vec![Type::Number, Type::Dynamic])),
        ("b", Type::set(Type::map(Type::Bool))),
    ]);
    let bytes = type_to_json_bytes(&ty);
    assert_eq!(
        String::from_utf8(bytes.clone()).expect("utf-8"),
        r#"["object",{"a":["tuple",["number","dynamic"]],"b":["set",["map","bool"]]}]"#
    );
    assert_eq!(type_from_json_bytes(&bytes).expect("type"), ty);
}

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

/// Property-test settings. Failures are reported with their shrunk input rather than saved
/// to a regressions file; the interesting ones are pinned as the named tests above.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn attr_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z_][a-z0-9_]{0,6}",
        1 => ".{0,4}",
    ]
}

fn arb_type() -> BoxedStrategy<Type> {
    let leaf = prop_oneof![
        Just(Type::String),
        Just(Type::Number),
        Just(Type::Bool),
        Just(Type::Dynamic),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(Type::list),
            inner.clone().prop_map(Type::set),
            inner.clone().prop_map(Type::map),
            prop::collection::btree_map(attr_name(), inner.clone(), 0..4).prop_map(Type::Object),
            prop::collection::vec(inner, 0..4).prop_map(Type::Tuple),
        ]
    })
    .boxed()
}

/// A type to put inside a dynamic wrapper: anything but dynamic itself.
fn arb_concrete_type() -> BoxedStrategy<Type> {
    arb_type()
        .prop_filter("a concrete type", |t| *t != Type::Dynamic)
        .boxed()
}

fn arb_number() -> BoxedStrategy<BigDecimal> {
    let specials = [
        "0",
        "1",
        "-1",
        "0.5",
        "1e300",
        "-1e-300",
        "0.8",
        "100000000000000000000000000007",
        "-100000000000000000000000000007",
        "0.1000000000000000000000000001",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "1e-400",
        "123456789012345678901234567890.123456789012345678901234567890",
    ]
    .map(num);
    prop_oneof![
        3 => any::<i64>().prop_map(BigDecimal::from),
        1 => any::<u64>().prop_map(BigDecimal::from),
        2 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(exact),
        2 => ("-?[1-9][0-9]{0,60}", -40i64..60)
            .prop_map(|(digits, scale)| BigDecimal::new(digits.parse::<BigInt>().expect("digits"), scale)),
        1 => prop::sample::select(specials.to_vec()),
    ]
    .boxed()
}

/// Refinements that the msgpack encoding can carry for `ty`, so they survive a round trip.
fn arb_refinements(ty: &Type) -> BoxedStrategy<Refinements> {
    let not_null = any::<bool>();
    match ty {
        Type::String => (not_null, prop::option::of(".{1,12}"))
            .prop_map(|(not_null, string_prefix)| Refinements {
                not_null,
                string_prefix,
                ..Refinements::default()
            })
            .boxed(),
        Type::Number => {
            let bound = || prop::option::of((arb_number(), any::<bool>()));
            (not_null, bound(), bound())
                .prop_map(|(not_null, lower, upper)| Refinements {
                    not_null,
                    number_lower: lower.map(|(value, inclusive)| NumberBound { value, inclusive }),
                    number_upper: upper.map(|(value, inclusive)| NumberBound { value, inclusive }),
                    ..Refinements::default()
                })
                .boxed()
        }
        Type::List(_) | Type::Set(_) | Type::Map(_) => (
            not_null,
            prop::option::of(prop_oneof![1u64..100, Just(u64::MAX)]),
            prop::option::of(prop_oneof![0u64..100, Just(u64::MAX)]),
        )
            .prop_map(|(not_null, length_lower, length_upper)| Refinements {
                not_null,
                length_lower,
                length_upper,
                ..Refinements::default()
            })
            .boxed(),
        _ => not_null
            .prop_map(|not_null| Refinements {
                not_null,
                ..Refinements::default()
            })
            .boxed(),
    }
}

/// A value conforming to `ty`: null, unknown (if allowed), or known with members made the same
/// way. `budget` bounds how many dynamic wrappers may nest.
fn arb_value(ty: &Type, unknowns: bool, budget: u32) -> BoxedStrategy<Value> {
    let mut options: Vec<(u32, BoxedStrategy<Value>)> = vec![
        (1, Just(Value::Null).boxed()),
        (6, arb_known(ty, unknowns, budget)),
    ];
    if unknowns {
        let unknown = if *ty == Type::Dynamic {
            // Refinements never survive a dynamic position.
            Just(Value::unknown()).boxed()
        } else {
            arb_refinements(ty)
                .prop_map(|r| Value::Unknown(Box::new(r)))
                .boxed()
        };
        options.push((1, unknown));
    }
    Union::new_weighted(options).boxed()
}

fn arb_known(ty: &Type, unknowns: bool, budget: u32) -> BoxedStrategy<Value> {
    let elems = |elem: &Type| prop::collection::vec(arb_value(elem, unknowns, budget), 0..4);
    match ty {
        Type::String => any::<String>().prop_map(Value::String).boxed(),
        Type::Number => arb_number().prop_map(Value::Number).boxed(),
        Type::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Type::List(elem) => elems(elem).prop_map(Value::List).boxed(),
        Type::Set(elem) => elems(elem).prop_map(Value::set).boxed(),
        Type::Map(elem) => {
            prop::collection::btree_map(".{0,5}", arb_value(elem, unknowns, budget), 0..4)
                .prop_map(Value::Map)
                .boxed()
        }
        Type::Tuple(types) => types
            .iter()
            .map(|t| arb_value(t, unknowns, budget))
            .collect::<Vec<_>>()
            .prop_map(Value::Tuple)
            .boxed(),
        Type::Object(attrs) => attrs
            .iter()
            .map(|(name, t)| {
                let name = name.clone();
                arb_value(t, unknowns, budget).prop_map(move |v| (name.clone(), v))
            })
            .collect::<Vec<_>>()
            .prop_map(|pairs| Value::Object(pairs.into_iter().collect()))
            .boxed(),
        Type::Dynamic if budget == 0 => prop_oneof![
            any::<String>().prop_map(|s| dynamic(Type::String, Value::String(s))),
            arb_number().prop_map(|n| dynamic(Type::Number, Value::Number(n))),
            Just(dynamic(Type::Bool, Value::Null)),
        ]
        .boxed(),
        Type::Dynamic => arb_concrete_type()
            .prop_flat_map(move |t| {
                arb_value(&t, unknowns, budget - 1).prop_map(move |v| dynamic(t.clone(), v))
            })
            .boxed(),
    }
}

fn arb_typed_value(unknowns: bool) -> impl Strategy<Value = (Type, Value)> {
    arb_type().prop_flat_map(move |t| arb_value(&t, unknowns, 2).prop_map(move |v| (t.clone(), v)))
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn msgpack_round_trips((ty, value) in arb_typed_value(true)) {
        prop_assert!(value.conforms_to(&ty), "generator made a non-conforming value");
        let bytes = msgpack::encode(&value, &ty).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let decoded = msgpack::decode(&bytes, &ty).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&decoded, &value);
        // The encoding is canonical: the decoded value encodes to the same bytes.
        let again = msgpack::encode(&decoded, &ty).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(again, bytes);
    }

    #[test]
    fn json_round_trips((ty, value) in arb_typed_value(false)) {
        prop_assert!(value.is_wholly_known());
        let bytes = json::encode(&value, &ty).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let decoded = json::decode(&bytes, &ty).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&decoded, &value);
        let tree = json::encode_value(&value, &ty).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(json::decode_value(&tree, &ty).map_err(|e| TestCaseError::fail(e.to_string()))?, value);
    }

    #[test]
    fn type_json_round_trips_for_any_type(ty in arb_type()) {
        let decoded = type_from_json_bytes(&type_to_json_bytes(&ty))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded, ty);
    }

    #[test]
    fn plain_values_in_dynamic_positions_keep_their_content((_ty, value) in arb_typed_value(true)) {
        // Strip the wrapper the generator may have added at the top: the encoder must infer.
        let plain = match &value {
            Value::Dynamic(d) => d.1.clone(),
            other => other.clone(),
        };
        let bytes = msgpack::encode(&plain, &Type::Dynamic).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let decoded = msgpack::decode(&bytes, &Type::Dynamic).map_err(|e| TestCaseError::fail(e.to_string()))?;
        match (&plain, &decoded) {
            (Value::Null, Value::Null) | (Value::Unknown(_), Value::Unknown(_)) => {}
            (_, Value::Dynamic(d)) => {
                prop_assert_eq!(&d.0, &infer_type(&plain));
                // The decoded value (wrappers inside resolved to the inferred types) is a
                // fixed point. Its bytes may differ: a set member that lost its wrapper sorts
                // elsewhere.
                let again = msgpack::encode(&decoded, &Type::Dynamic).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let redecoded = msgpack::decode(&again, &Type::Dynamic).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(redecoded, decoded);
            }
            _ => prop_assert!(false, "unexpected decoding {:?} of {:?}", decoded, plain),
        }
    }
}

proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64), which in 0usize..6) {
        let types = [
            Type::Dynamic,
            Type::String,
            Type::Number,
            Type::list(Type::Dynamic),
            Type::object([("a", Type::Number), ("b", Type::set(Type::String))]),
            Type::map(Type::Tuple(vec![Type::Bool, Type::Number])),
        ];
        let ty = &types[which];
        let _ = msgpack::decode(&bytes, ty);
        let _ = json::decode(&bytes, ty);
        let _ = json::decode_lenient_object(&bytes, ty);
        let _ = type_from_json_bytes(&bytes);
    }

    #[test]
    fn corrupted_encodings_never_panic(
        (ty, value) in arb_typed_value(true),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let Ok(mut bytes) = msgpack::encode(&value, &ty) else {
            return Err(TestCaseError::fail("encode failed"));
        };
        for (at, byte) in &flips {
            let i = at.index(bytes.len());
            bytes[i] = *byte;
        }
        let _ = msgpack::decode(&bytes, &ty);
        let _ = msgpack::decode(&bytes[..cut.index(bytes.len() + 1)], &ty);
        if let Ok(text) = json::encode(&value, &ty) {
            let mut text = text;
            for (at, byte) in &flips {
                let i = at.index(text.len());
                text[i] = *byte;
            }
            let _ = json::decode(&text, &ty);
            let _ = json::decode_lenient_object(&text, &ty);
        }
    }

    #[test]
    fn arbitrary_numeric_text_never_panics(text in "[-+0-9.eE]{0,24}") {
        let bytes = {
            let mut b = vec![0xa0 | u8::try_from(text.len()).expect("short")];
            b.extend_from_slice(text.as_bytes());
            b
        };
        let _ = msgpack::decode(&bytes, &Type::Number);
        let quoted = format!("\"{text}\"");
        let _ = json::decode(quoted.as_bytes(), &Type::Number);
        let _ = json::decode(text.as_bytes(), &Type::Number);
    }
}
