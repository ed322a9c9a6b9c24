//! Kubernetes protobuf for built-in types, as the API server speaks it to client-go (Helm).
//!
//! kubesim keeps every object as JSON; protobuf is converted at the edge, field by field, with a
//! table generated from the Go API types ([`schema`]): each field's number, JSON name, type,
//! and the Go facts that decide its JSON form (an inlined struct, `omitempty`, a pointer whose
//! zero value means something). Types with their own JSON form (`Time`, `IntOrString`,
//! `Quantity`, `RawExtension`, ...) are converted by hand here.
//!
//! The wire envelope is the API server's: the magic `k8s\0`, then a `runtime.Unknown` with the
//! object's `apiVersion`/`kind` and the object's message as `raw`. Watches stream `WatchEvent`
//! messages without the magic, each prefixed by its length (4 bytes, big-endian), with the
//! object enveloped inside. Custom resources have no protobuf form (as in Kubernetes).

pub mod schema;
pub mod wire;

use serde_json::{Map, Number, Value, json};

use schema::{Field, Scalar, Type, message_for, messages};
use wire::{Raw, WireError, fields, put_bytes, put_key, put_varint_field};

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The envelope's magic prefix.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The bytes do not start with the envelope's magic.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    NoMagic,
    /// Malformed protobuf.
    #[error("malformed protobuf")]
    Wire(#[from] WireError),
    /// The envelope names a kind kubesim has no protobuf schema for.
    #[error("no kind \"{kind}\" is registered for version \"{api_version}\"")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// A JSON value does not fit its field's type.
    #[error("field {field}: expected {expected}")]
    Mismatch {
        /// The field's JSON name.
        field: String,
        /// What the schema wants.
        expected: &'static str,
    },
}

impl ProtoError {
    /// Stable label of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoMagic => "no_magic",
            Self::Wire(_) => "wire",
            Self::UnknownKind { .. } => "unknown_kind",
            Self::Mismatch { .. } => "mismatch",
        }
    }
}

/// Whether kubesim can speak protobuf for this `apiVersion`/`kind`.
pub fn supports(api_version: &str, kind: &str) -> bool {
    message_for(api_version, kind).is_some()
}

/// Decodes an enveloped object into its JSON form (with `apiVersion` and `kind`).
pub fn decode(bytes: &[u8]) -> Result<Value, ProtoError> {
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(ProtoError::NoMagic)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in fields(body)? {
        match (n, f) {
            (1, Raw::Len(tm)) => {
                for (m, g) in fields(tm)? {
                    if let Raw::Len(s) = g {
                        let s = String::from_utf8_lossy(s).into_owned();
                        match m {
                            1 => api_version = s,
                            2 => kind = s,
                            _ => {}
                        }
                    }
                }
            }
            (2, Raw::Len(r)) => raw = r,
            _ => {}
        }
    }
    let (name, _) = message_for(&api_version, &kind).ok_or_else(|| ProtoError::UnknownKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let mut obj = decode_message(name, raw)?;
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), json!(api_version));
        o.insert("kind".into(), json!(kind));
    }
    Ok(obj)
}

/// Encodes an object (with `apiVersion` and `kind`) in the envelope.
pub fn encode(obj: &Value) -> Result<Vec<u8>, ProtoError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let (name, _) = message_for(api_version, kind).ok_or_else(|| ProtoError::UnknownKind {
        api_version: api_version.into(),
        kind: kind.into(),
    })?;
    let mut raw = Vec::new();
    encode_message(name, obj, &mut raw)?;
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(raw.len() + type_meta.len() + 16);
    out.extend_from_slice(MAGIC);
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, &raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    Ok(out)
}

/// One frame of a protobuf watch stream: the length, then a `WatchEvent` whose object is
/// enveloped.
pub fn watch_frame(event_type: &str, obj: &Value) -> Result<Vec<u8>, ProtoError> {
    let inner = encode(obj)?;
    let mut raw_ext = Vec::new();
    put_bytes(&mut raw_ext, 1, &inner);
    let mut event = Vec::new();
    put_bytes(&mut event, 1, event_type.as_bytes());
    put_bytes(&mut event, 2, &raw_ext);
    let mut frame = Vec::with_capacity(event.len() + 4);
    frame.extend_from_slice(&(event.len() as u32).to_be_bytes());
    frame.extend_from_slice(&event);
    Ok(frame)
}

fn mismatch(f: &Field, expected: &'static str) -> ProtoError {
    ProtoError::Mismatch {
        field: f.json.clone().unwrap_or_default(),
        expected,
    }
}

fn encode_message(name: &str, v: &Value, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    if encode_special(name, v, out)? {
        return Ok(());
    }
    let Some(msg) = messages().get(name) else {
        return Err(ProtoError::UnknownKind {
            api_version: String::new(),
            kind: name.into(),
        });
    };
    let Some(obj) = v.as_object() else {
        return Err(ProtoError::Mismatch {
            field: name.into(),
            expected: "an object",
        });
    };
    for f in &msg.fields {
        match &f.json {
            None => {
                // An inlined struct: its fields sit in this object.
                let Type::Message(inner) = &f.ty else {
                    continue;
                };
                let mut sub = Vec::new();
                encode_message(inner, v, &mut sub)?;
                put_bytes(out, f.number, &sub);
            }
            Some(j) => match obj.get(j) {
                None | Some(Value::Null) => {}
                Some(x) => encode_field(f, &f.ty, x, out)?,
            },
        }
    }
    Ok(())
}

fn encode_field(f: &Field, ty: &Type, v: &Value, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    match ty {
        Type::Scalar(s) => encode_scalar(f, f.number, *s, v, out),
        Type::Message(name) => {
            let mut sub = Vec::new();
            encode_message(name, v, &mut sub)?;
            put_bytes(out, f.number, &sub);
            Ok(())
        }
        Type::Repeated(inner) => {
            for x in v.as_array().ok_or_else(|| mismatch(f, "an array"))? {
                encode_field(f, inner, x, out)?;
            }
            Ok(())
        }
        Type::Map(_, val) => {
            for (k, x) in v.as_object().ok_or_else(|| mismatch(f, "an object"))? {
                let mut entry = Vec::new();
                put_bytes(&mut entry, 1, k.as_bytes());
                let entry_field = Field {
                    number: 2,
                    ..f.clone()
                };
                if !x.is_null() {
                    encode_field(&entry_field, val, x, &mut entry)?;
                }
                put_bytes(out, f.number, &entry);
            }
            Ok(())
        }
        Type::Wrapped(inner) => {
            let item = Field {
                number: 1,
                ..f.clone()
            };
            let mut sub = Vec::new();
            for x in v.as_array().ok_or_else(|| mismatch(f, "an array"))? {
                encode_field(&item, inner, x, &mut sub)?;
            }
            put_bytes(out, f.number, &sub);
            Ok(())
        }
    }
}

fn as_i64(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().filter(|x| x.fract() == 0.0).map(|x| x as i64))
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn encode_scalar(
    f: &Field,
    n: u32,
    s: Scalar,
    v: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    match s {
        Scalar::String => {
            let text = match v {
                Value::String(t) => t.clone(),
                Value::Number(x) => x.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return Err(mismatch(f, "a string")),
            };
            put_bytes(out, n, text.as_bytes());
        }
        Scalar::Bytes => {
            let b = v
                .as_str()
                .and_then(crate::base64::decode)
                .ok_or_else(|| mismatch(f, "base64 bytes"))?;
            put_bytes(out, n, &b);
        }
        Scalar::Bool => {
            let b = v.as_bool().ok_or_else(|| mismatch(f, "a bool"))?;
            put_varint_field(out, n, u64::from(b));
        }
        Scalar::Int32 | Scalar::Int64 => {
            let x = as_i64(v).ok_or_else(|| mismatch(f, "an integer"))?;
            put_varint_field(out, n, x as u64);
        }
        Scalar::Uint32 | Scalar::Uint64 => {
            let x = v
                .as_u64()
                .ok_or_else(|| mismatch(f, "an unsigned integer"))?;
            put_varint_field(out, n, x);
        }
        Scalar::Double => {
            let x = v.as_f64().ok_or_else(|| mismatch(f, "a number"))?;
            put_key(out, n, wire::WireType::Fixed64);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Scalar::Float => {
            let x = v.as_f64().ok_or_else(|| mismatch(f, "a number"))? as f32;
            put_key(out, n, wire::WireType::Fixed32);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
    }
    Ok(())
}

/// Go's zero time (`0001-01-01T00:00:00Z`) in Unix seconds.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// Encodes the types with their own JSON form; `false` when `name` is not one of them.
fn encode_special(name: &str, v: &Value, out: &mut Vec<u8>) -> Result<bool, ProtoError> {
    let bad = |expected| ProtoError::Mismatch {
        field: name.into(),
        expected,
    };
    match name {
        "meta.v1.Time" | "meta.v1.MicroTime" => {
            let (secs, nanos) = v
                .as_str()
                .and_then(crate::meta::parse_rfc3339)
                .ok_or_else(|| bad("an RFC 3339 time"))?;
            put_varint_field(out, 1, secs as u64);
            let nanos = if name == "meta.v1.Time" {
                0
            } else {
                nanos / 1000 * 1000
            };
            put_varint_field(out, 2, u64::from(nanos));
        }
        "meta.v1.Duration" => {
            let ns = v
                .as_str()
                .and_then(parse_go_duration)
                .ok_or_else(|| bad("a duration"))?;
            put_varint_field(out, 1, ns as u64);
        }
        "intstr.IntOrString" => match v {
            Value::String(s) => {
                put_varint_field(out, 1, 1);
                put_bytes(out, 3, s.as_bytes());
            }
            _ => {
                let n = as_i64(v).ok_or_else(|| bad("an int or a string"))?;
                put_varint_field(out, 1, 0);
                put_varint_field(out, 2, n as u64);
            }
        },
        "resource.Quantity" => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(bad("a quantity")),
            };
            put_bytes(out, 1, s.as_bytes());
        }
        "runtime.RawExtension" | "meta.v1.FieldsV1" | "apiextensions.v1.JSON" => {
            let raw = serde_json::to_vec(v).unwrap_or_default();
            put_bytes(out, 1, &raw);
        }
        "apiextensions.v1.JSONSchemaPropsOrArray" => match v {
            Value::Array(items) => {
                for x in items {
                    let mut sub = Vec::new();
                    encode_message("apiextensions.v1.JSONSchemaProps", x, &mut sub)?;
                    put_bytes(out, 2, &sub);
                }
            }
            _ => {
                let mut sub = Vec::new();
                encode_message("apiextensions.v1.JSONSchemaProps", v, &mut sub)?;
                put_bytes(out, 1, &sub);
            }
        },
        "apiextensions.v1.JSONSchemaPropsOrBool" => match v {
            Value::Bool(b) => put_varint_field(out, 1, u64::from(*b)),
            _ => {
                put_varint_field(out, 1, 1);
                let mut sub = Vec::new();
                encode_message("apiextensions.v1.JSONSchemaProps", v, &mut sub)?;
                put_bytes(out, 2, &sub);
            }
        },
        "apiextensions.v1.JSONSchemaPropsOrStringArray" => match v {
            Value::Array(items) => {
                for x in items {
                    put_bytes(out, 2, x.as_str().unwrap_or_default().as_bytes());
                }
            }
            _ => {
                let mut sub = Vec::new();
                encode_message("apiextensions.v1.JSONSchemaProps", v, &mut sub)?;
                put_bytes(out, 1, &sub);
            }
        },
        _ => return Ok(false),
    }
    Ok(true)
}

/// Decodes a message of the table (or a hand-converted type) into JSON.
fn decode_message(name: &str, buf: &[u8]) -> Result<Value, ProtoError> {
    if let Some(v) = decode_special(name, buf)? {
        return Ok(v);
    }
    let msg = messages()
        .get(name)
        .ok_or_else(|| ProtoError::UnknownKind {
            api_version: String::new(),
            kind: name.into(),
        })?;
    let raws = fields(buf)?;
    let mut obj = Map::new();
    for f in &msg.fields {
        let mine: Vec<Raw<'_>> = raws
            .iter()
            .filter(|(n, _)| *n == f.number)
            .map(|(_, r)| *r)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let value = decode_field(&f.ty, &mine)?;
        match &f.json {
            None => {
                if let Value::Object(inner) = value {
                    obj.extend(inner);
                }
            }
            Some(j) => {
                if value.is_null() || (f.omitempty && !f.pointer && is_zero_scalar(&f.ty, &value)) {
                    continue;
                }
                obj.insert(j.clone(), value);
            }
        }
    }
    Ok(Value::Object(obj))
}

/// Whether a scalar holds its zero value (what Go's `omitempty` leaves out).
fn is_zero_scalar(ty: &Type, v: &Value) -> bool {
    match ty {
        Type::Scalar(_) => match v {
            Value::String(s) => s.is_empty(),
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            _ => false,
        },
        Type::Repeated(_) | Type::Wrapped(_) => v.as_array().is_some_and(Vec::is_empty),
        Type::Map(..) => v.as_object().is_some_and(Map::is_empty),
        Type::Message(_) => false,
    }
}

fn decode_field(ty: &Type, raws: &[Raw<'_>]) -> Result<Value, ProtoError> {
    let last = raws.last().copied();
    match ty {
        Type::Scalar(s) => Ok(last.map(|r| decode_scalar(*s, r)).unwrap_or(Value::Null)),
        Type::Message(name) => match last {
            Some(Raw::Len(b)) => decode_message(name, b),
            _ => Ok(Value::Null),
        },
        Type::Repeated(inner) => {
            let mut items = Vec::new();
            for r in raws {
                match (inner.as_ref(), r) {
                    // Packed scalars: several values in one length-delimited field.
                    (Type::Scalar(s), Raw::Len(b))
                        if !matches!(s, Scalar::String | Scalar::Bytes) =>
                    {
                        for (_, x) in packed(*s, b)? {
                            items.push(decode_scalar(*s, x));
                        }
                    }
                    _ => items.push(decode_field(inner, std::slice::from_ref(r))?),
                }
            }
            Ok(Value::Array(items))
        }
        Type::Map(_, val) => {
            let mut map = Map::new();
            for r in raws {
                let Raw::Len(b) = r else { continue };
                let entry = fields(b)?;
                let key = entry
                    .iter()
                    .find_map(|(n, x)| match (n, x) {
                        (1, Raw::Len(k)) => Some(String::from_utf8_lossy(k).into_owned()),
                        _ => None,
                    })
                    .unwrap_or_default();
                let vals: Vec<Raw<'_>> = entry
                    .iter()
                    .filter(|(n, _)| *n == 2)
                    .map(|(_, x)| *x)
                    .collect();
                let value = if vals.is_empty() {
                    zero_of(val)
                } else {
                    decode_field(val, &vals)?
                };
                map.insert(key, value);
            }
            Ok(Value::Object(map))
        }
        Type::Wrapped(inner) => {
            let Some(Raw::Len(b)) = last else {
                return Ok(Value::Array(Vec::new()));
            };
            let items: Vec<Raw<'_>> = fields(b)?
                .into_iter()
                .filter(|(n, _)| *n == 1)
                .map(|(_, x)| x)
                .collect();
            decode_field(&Type::Repeated(inner.clone()), &items)
        }
    }
}

fn zero_of(ty: &Type) -> Value {
    match ty {
        Type::Scalar(Scalar::String | Scalar::Bytes) => json!(""),
        Type::Scalar(Scalar::Bool) => json!(false),
        Type::Scalar(_) => json!(0),
        Type::Repeated(_) | Type::Wrapped(_) => json!([]),
        Type::Map(..) => json!({}),
        Type::Message(_) => json!({}),
    }
}

fn packed(s: Scalar, b: &[u8]) -> Result<Vec<(u32, Raw<'_>)>, ProtoError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        match s {
            Scalar::Double => {
                let x = b.get(pos..pos + 8).ok_or(WireError::Truncated)?;
                out.push((
                    0,
                    Raw::Fixed64(u64::from_le_bytes(
                        x.try_into().map_err(|_| WireError::Truncated)?,
                    )),
                ));
                pos += 8;
            }
            Scalar::Float => {
                let x = b.get(pos..pos + 4).ok_or(WireError::Truncated)?;
                out.push((
                    0,
                    Raw::Fixed32(u32::from_le_bytes(
                        x.try_into().map_err(|_| WireError::Truncated)?,
                    )),
                ));
                pos += 4;
            }
            _ => out.push((0, Raw::Varint(wire::varint(b, &mut pos)?))),
        }
    }
    Ok(out)
}

fn decode_scalar(s: Scalar, r: Raw<'_>) -> Value {
    match (s, r) {
        (Scalar::String, Raw::Len(b)) => Value::String(String::from_utf8_lossy(b).into_owned()),
        (Scalar::Bytes, Raw::Len(b)) => Value::String(crate::base64::encode(b)),
        (Scalar::Bool, Raw::Varint(v)) => Value::Bool(v != 0),
        (Scalar::Int32, Raw::Varint(v)) => json!(i64::from(v as i32)),
        (Scalar::Int64, Raw::Varint(v)) => json!(v as i64),
        (Scalar::Uint32 | Scalar::Uint64, Raw::Varint(v)) => json!(v),
        (Scalar::Double, Raw::Fixed64(v)) => {
            Number::from_f64(f64::from_bits(v)).map_or(Value::Null, Value::Number)
        }
        (Scalar::Float, Raw::Fixed32(v)) => {
            Number::from_f64(f64::from(f32::from_bits(v))).map_or(Value::Null, Value::Number)
        }
        _ => Value::Null,
    }
}

fn varint_field(raws: &[(u32, Raw<'_>)], n: u32) -> Option<u64> {
    raws.iter().rev().find_map(|(m, r)| match (m, r) {
        (m, Raw::Varint(v)) if *m == n => Some(*v),
        _ => None,
    })
}

fn bytes_field<'a>(raws: &[(u32, Raw<'a>)], n: u32) -> Option<&'a [u8]> {
    raws.iter().rev().find_map(|(m, r)| match (m, r) {
        (m, Raw::Len(b)) if *m == n => Some(*b),
        _ => None,
    })
}

fn raw_json(b: &[u8]) -> Value {
    if b.is_empty() {
        return Value::Null;
    }
    if b.starts_with(MAGIC) {
        return decode(b).unwrap_or(Value::Null);
    }
    serde_json::from_slice(b)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(b).into_owned()))
}

/// Decodes the types with their own JSON form; `None` when `name` is not one of them.
fn decode_special(name: &str, buf: &[u8]) -> Result<Option<Value>, ProtoError> {
    if !is_hand_converted(name) {
        return Ok(None);
    }
    let raws = fields(buf)?;
    let schema_props = |b: &[u8]| decode_message("apiextensions.v1.JSONSchemaProps", b);
    Ok(Some(match name {
        "meta.v1.Time" | "meta.v1.MicroTime" => {
            if buf.is_empty() {
                return Ok(Some(Value::Null));
            }
            let secs = varint_field(&raws, 1).unwrap_or(0) as i64;
            if secs <= GO_ZERO_TIME {
                return Ok(Some(Value::Null));
            }
            let base = crate::meta::format_unix(secs);
            if name == "meta.v1.Time" {
                json!(base)
            } else {
                let nanos = varint_field(&raws, 2).unwrap_or(0) as u32;
                json!(format!(
                    "{}.{:06}Z",
                    base.trim_end_matches('Z'),
                    nanos / 1000
                ))
            }
        }
        "meta.v1.Duration" => json!(format_go_duration(
            varint_field(&raws, 1).unwrap_or(0) as i64
        )),
        "intstr.IntOrString" => {
            if varint_field(&raws, 1) == Some(1) {
                json!(String::from_utf8_lossy(
                    bytes_field(&raws, 3).unwrap_or_default()
                ))
            } else {
                json!(i64::from(varint_field(&raws, 2).unwrap_or(0) as i32))
            }
        }
        "resource.Quantity" => json!(String::from_utf8_lossy(
            bytes_field(&raws, 1).unwrap_or_default()
        )),
        "runtime.RawExtension" | "meta.v1.FieldsV1" | "apiextensions.v1.JSON" => {
            raw_json(bytes_field(&raws, 1).unwrap_or_default())
        }
        "apiextensions.v1.JSONSchemaPropsOrArray" => match bytes_field(&raws, 1) {
            Some(b) => schema_props(b)?,
            None => Value::Array(
                raws.iter()
                    .filter_map(|(n, r)| match (n, r) {
                        (2, Raw::Len(b)) => Some(schema_props(b)),
                        _ => None,
                    })
                    .collect::<Result<_, _>>()?,
            ),
        },
        "apiextensions.v1.JSONSchemaPropsOrBool" => match bytes_field(&raws, 2) {
            Some(b) => schema_props(b)?,
            None => json!(varint_field(&raws, 1).unwrap_or(0) != 0),
        },
        _ => match bytes_field(&raws, 1) {
            // JSONSchemaPropsOrStringArray.
            Some(b) => schema_props(b)?,
            None => Value::Array(
                raws.iter()
                    .filter_map(|(n, r)| match (n, r) {
                        (2, Raw::Len(b)) => Some(json!(String::from_utf8_lossy(b))),
                        _ => None,
                    })
                    .collect(),
            ),
        },
    }))
}

/// The fields of an object its built-in type does not have, named as the API server's strict
/// decoding names them (`spec.replica`, `spec.template.spec.containers[0].foo`); `None` when
/// kubesim has no schema for the kind (custom resources). With `prune`, they are removed, as
/// decoding into the Go type drops them.
pub fn unknown_fields(obj: &mut Value, prune: bool) -> Option<Vec<String>> {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    unknown_fields_as(&api_version, &kind, obj, prune)
}

/// [`unknown_fields`] of an object taken as `api_version` and `kind`, whatever it says it is
/// (a request body, checked before its own `apiVersion` and `kind` are).
pub fn unknown_fields_as(
    api_version: &str,
    kind: &str,
    obj: &mut Value,
    prune: bool,
) -> Option<Vec<String>> {
    let (name, _) = message_for(api_version, kind)?;
    let mut found = Vec::new();
    walk(name, obj, None, Path::Root, &mut found, prune, true);
    Some(found)
}

/// Removes the fields of a replacement of `stored` that its built-in type does not have, as
/// [`unknown_fields`] with `prune`, walking only what differs from `stored`: a stored object was
/// pruned when written, so a part equal to its part has nothing to remove (a status write
/// leaves a pod's spec as it is, and the spec is most of a pod).
pub fn prune_changed(obj: &mut Value, stored: &Value) {
    let field = |name: &str| obj.get(name).and_then(Value::as_str).unwrap_or("");
    let Some((name, _)) = message_for(field("apiVersion"), field("kind")) else {
        return;
    };
    walk(
        name,
        obj,
        Some(stored),
        Path::Root,
        &mut Vec::new(),
        true,
        true,
    );
}

/// [`prune_changed`] of one top-level field of an object of `api_version` and `kind`, its other
/// fields being the stored object's (a pod status write); `false` when the type has no such
/// field, which pruning drops.
pub fn prune_changed_field(
    api_version: &str,
    kind: &str,
    field: &str,
    value: &mut Value,
    stored: Option<&Value>,
) -> bool {
    let Some((name, _)) = message_for(api_version, kind).filter(|(n, _)| !is_hand_converted(n))
    else {
        return true;
    };
    let known = json_fields(name);
    let Ok(i) = known.binary_search_by(|(j, _)| (*j).cmp(field)) else {
        return false;
    };
    let here = Path::Key(&Path::Root, field);
    walk_type(known[i].1, value, stored, here, &mut Vec::new(), true);
    true
}

/// The JSON fields of every message, by message name.
type FieldTable = std::collections::HashMap<
    &'static str,
    Vec<(&'static str, &'static Type)>,
    std::hash::BuildHasherDefault<Fnv>,
>;

/// FNV-1a, for [`FieldTable`]: it is looked up once per object a write's pruning walks, and its
/// keys are message names compiled in, so SipHash's defence against chosen keys (and its cost,
/// a tenth of the walk) buys nothing.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The JSON names of a message's fields, inlined structs' fields included, sorted by name
/// (the first of a repeated name kept); computed once per message (every write of a built-in
/// type walks them, looking each key up).
fn json_fields(name: &str) -> &'static [(&'static str, &'static Type)] {
    static TABLE: std::sync::OnceLock<FieldTable> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        messages()
            .keys()
            .map(|name| {
                let mut fields = collect_json_fields(name);
                fields.sort_by_key(|(json, _)| *json);
                fields.dedup_by_key(|(json, _)| *json);
                (name.as_str(), fields)
            })
            .collect()
    });
    table.get(name).map_or(&[], Vec::as_slice)
}

fn collect_json_fields(name: &str) -> Vec<(&'static str, &'static Type)> {
    let mut out = Vec::new();
    if let Some(msg) = messages().get(name) {
        for f in &msg.fields {
            match (&f.json, &f.ty) {
                (Some(j), ty) => out.push((j.as_str(), ty)),
                (None, Type::Message(inner)) => out.extend(collect_json_fields(inner)),
                (None, _) => {}
            }
        }
    }
    out
}

/// Where the walk is, rendered only when an unknown field is found there.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn render(&self) -> String {
        match self {
            Path::Root => String::new(),
            Path::Key(parent, key) => match parent {
                Path::Root => (*key).to_string(),
                _ => format!("{}.{key}", parent.render()),
            },
            Path::Index(parent, i) => format!("{}[{i}]", parent.render()),
        }
    }
}

fn walk(
    name: &str,
    v: &mut Value,
    old: Option<&Value>,
    path: Path,
    found: &mut Vec<String>,
    prune: bool,
    top: bool,
) {
    if is_hand_converted(name) {
        return;
    }
    let Some(obj) = v.as_object_mut() else {
        return;
    };
    let known = json_fields(name);
    let mut unknown = Vec::new();
    for (key, child) in obj.iter_mut() {
        if top && (key == "apiVersion" || key == "kind") {
            continue;
        }
        let here = Path::Key(&path, key);
        match known.binary_search_by(|(j, _)| (*j).cmp(key.as_str())) {
            Ok(i) => walk_type(
                known[i].1,
                child,
                old.and_then(|o| o.get(key)),
                here,
                found,
                prune,
            ),
            Err(_) => {
                found.push(here.render());
                unknown.push(key.clone());
            }
        }
    }
    if prune {
        for key in unknown {
            obj.remove(&key);
        }
    }
}

/// Walks `v` as a `ty`; `old` is the same place in an object already walked and pruned, and a
/// part equal to it is skipped.
fn walk_type(
    ty: &Type,
    v: &mut Value,
    old: Option<&Value>,
    path: Path,
    found: &mut Vec<String>,
    prune: bool,
) {
    if matches!(ty, Type::Scalar(_)) || old.is_some_and(|o| o == &*v) {
        return;
    }
    match ty {
        Type::Scalar(_) => {}
        Type::Message(name) => walk(name, v, old, path, found, prune, false),
        Type::Repeated(inner) | Type::Wrapped(inner) => {
            if let Some(items) = v.as_array_mut() {
                for (i, x) in items.iter_mut().enumerate() {
                    let was = old.and_then(|o| o.get(i));
                    walk_type(inner, x, was, Path::Index(&path, i), found, prune);
                }
            }
        }
        Type::Map(_, val) => {
            if let Some(m) = v.as_object_mut() {
                for (k, x) in m.iter_mut() {
                    let was = old.and_then(|o| o.get(k));
                    walk_type(val, x, was, Path::Key(&path, k), found, prune);
                }
            }
        }
    }
}

fn is_hand_converted(name: &str) -> bool {
    matches!(
        name,
        "meta.v1.Time"
            | "meta.v1.MicroTime"
            | "meta.v1.Duration"
            | "intstr.IntOrString"
            | "resource.Quantity"
            | "runtime.RawExtension"
            | "meta.v1.FieldsV1"
            | "apiextensions.v1.JSON"
            | "apiextensions.v1.JSONSchemaPropsOrArray"
            | "apiextensions.v1.JSONSchemaPropsOrBool"
            | "apiextensions.v1.JSONSchemaPropsOrStringArray"
    )
}

/// Parses a Go duration (`1h2m3.5s`, `300ms`) into nanoseconds.
pub fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    let ns = total.round() as i64;
    Some(if neg { -ns } else { ns })
}

/// Formats nanoseconds as Go's `time.Duration.String()` does.
pub fn format_go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    let frac = |v: u64, digits: u32| -> String {
        let p = 10u64.pow(digits);
        let (whole, rest) = (v / p, v % p);
        if rest == 0 {
            whole.to_string()
        } else {
            let s = format!("{rest:0width$}", width = digits as usize);
            format!("{whole}.{}", s.trim_end_matches('0'))
        }
    };
    if u < 1_000 {
        return format!("{sign}{u}ns");
    }
    if u < 1_000_000 {
        return format!("{sign}{}µs", frac(u, 3));
    }
    if u < 1_000_000_000 {
        return format!("{sign}{}ms", frac(u, 6));
    }
    let secs_total = u / 1_000_000_000;
    let nanos = u % 1_000_000_000;
    let (h, m, s) = (secs_total / 3600, (secs_total % 3600) / 60, secs_total % 60);
    let secs = frac(s * 1_000_000_000 + nanos, 9);
    match (h, m) {
        (0, 0) => format!("{sign}{secs}s"),
        (0, m) => format!("{sign}{m}m{secs}s"),
        (h, m) => format!("{sign}{h}h{m}m{secs}s"),
    }
}

#[cfg(test)]
mod tests;
