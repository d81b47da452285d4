//! The kinds of item a msgpack marker introduces.

use rmp::Marker;

pub(super) fn is_ext(marker: Marker) -> bool {
    matches!(
        marker,
        Marker::FixExt1
            | Marker::FixExt2
            | Marker::FixExt4
            | Marker::FixExt8
            | Marker::FixExt16
            | Marker::Ext8
            | Marker::Ext16
            | Marker::Ext32
    )
}

/// What a marker introduces, for errors.
pub(super) fn describe(marker: Marker) -> String {
    match marker {
        Marker::Null => "msgpack nil".into(),
        Marker::True | Marker::False => "a msgpack bool".into(),
        Marker::FixPos(_)
        | Marker::FixNeg(_)
        | Marker::U8
        | Marker::U16
        | Marker::U32
        | Marker::U64
        | Marker::I8
        | Marker::I16
        | Marker::I32
        | Marker::I64 => "a msgpack integer".into(),
        Marker::F32 | Marker::F64 => "a msgpack float".into(),
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
            "a msgpack string".into()
        }
        Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => "msgpack binary data".into(),
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => "a msgpack array".into(),
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => "a msgpack map".into(),
        Marker::Reserved => "the reserved msgpack marker 0xc1".into(),
        _ => "a msgpack extension".into(),
    }
}

pub(super) fn is_str(marker: Marker) -> bool {
    matches!(
        marker,
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32
    )
}

pub(super) fn is_bin(marker: Marker) -> bool {
    matches!(marker, Marker::Bin8 | Marker::Bin16 | Marker::Bin32)
}
