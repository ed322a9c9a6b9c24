//! The message table read from `schema.txt` (generated from the Go API types by
//! scripts/gen-kube-protobuf-schema.py): per field its number, JSON name, type and Go flags.

use std::collections::HashMap;
use std::sync::OnceLock;

const SCHEMA: &str = include_str!("schema.txt");

/// A scalar protobuf type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// UTF-8 string.
    String,
    /// Bytes (base64 in JSON).
    Bytes,
    /// Bool.
    Bool,
    /// Signed 32-bit (negative values are 10-byte varints, as in proto2 `int32`).
    Int32,
    /// Signed 64-bit.
    Int64,
    /// Unsigned 32-bit.
    Uint32,
    /// Unsigned 64-bit.
    Uint64,
    /// 64-bit float.
    Double,
    /// 32-bit float.
    Float,
}

/// A field's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    /// A scalar.
    Scalar(Scalar),
    /// A message of the table, or one of the types converted by hand (`meta.v1.Time`, ...).
    Message(String),
    /// Repeated elements.
    Repeated(Box<Type>),
    /// A map (string keys in every Kubernetes type).
    Map(Box<Type>, Box<Type>),
    /// A named slice protobuf wraps in a message with `repeated T items = 1`.
    Wrapped(Box<Type>),
}

/// One field of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Field number.
    pub number: u32,
    /// JSON name (`None` for an inlined struct, whose fields sit in the parent's JSON object).
    pub json: Option<String>,
    /// Type.
    pub ty: Type,
    /// The Go field is a pointer: a present zero value means something.
    pub pointer: bool,
    /// The Go field is `omitempty` (or `omitzero`): a zero value is left out of the JSON.
    pub omitempty: bool,
}

/// A message: its fields in number order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// Fields.
    pub fields: Vec<Field>,
}

impl Message {
    /// The field with this number.
    pub fn by_number(&self, n: u32) -> Option<&Field> {
        self.fields.iter().find(|f| f.number == n)
    }
}

fn parse_type(s: &str) -> Option<Type> {
    if let Some(rest) = s.strip_prefix("~") {
        return Some(Type::Wrapped(Box::new(parse_type(
            rest.strip_prefix("[]")?,
        )?)));
    }
    if let Some(rest) = s.strip_prefix("[]") {
        return Some(Type::Repeated(Box::new(parse_type(rest)?)));
    }
    if let Some(rest) = s.strip_prefix("map[") {
        let (k, v) = rest.split_once(']')?;
        return Some(Type::Map(
            Box::new(parse_type(k)?),
            Box::new(parse_type(v)?),
        ));
    }
    Some(Type::Scalar(match s {
        "string" => Scalar::String,
        "bytes" => Scalar::Bytes,
        "bool" => Scalar::Bool,
        "int32" => Scalar::Int32,
        "int64" => Scalar::Int64,
        "uint32" => Scalar::Uint32,
        "uint64" => Scalar::Uint64,
        "double" => Scalar::Double,
        "float" => Scalar::Float,
        _ => return Some(Type::Message(s.to_string())),
    }))
}

/// Parses the schema text; `Err` names the first line it cannot read.
pub fn parse(text: &str) -> Result<HashMap<String, Message>, String> {
    let mut out: HashMap<String, Message> = HashMap::new();
    let mut current: Option<(String, Message)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("message ") {
            if let Some((n, mut m)) = current.take() {
                m.fields.sort_by_key(|f| f.number);
                out.insert(n, m);
            }
            current = Some((name.to_string(), Message::default()));
            continue;
        }
        let bad = || format!("schema line {}: {line:?}", i + 1);
        let mut parts = line.split(' ');
        let (Some(num), Some(json), Some(ty), Some(flags)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let field = Field {
            number: num.parse().map_err(|_| bad())?,
            json: (json != "-").then(|| json.to_string()),
            ty: parse_type(ty).ok_or_else(bad)?,
            pointer: flags.contains('p'),
            omitempty: flags.contains('o'),
        };
        current.as_mut().ok_or_else(bad)?.1.fields.push(field);
    }
    if let Some((n, mut m)) = current {
        m.fields.sort_by_key(|f| f.number);
        out.insert(n, m);
    }
    Ok(out)
}

/// The built-in table.
pub fn messages() -> &'static HashMap<String, Message> {
    static TABLE: OnceLock<HashMap<String, Message>> = OnceLock::new();
    TABLE.get_or_init(|| parse(SCHEMA).expect("the generated schema parses (checked by a test)"))
}

/// The package key of an API group (`core`, `apps`, `rbac`, ...), if kubesim has its types.
pub fn package_of(group: &str) -> Option<&'static str> {
    Some(match group {
        "" => "core",
        "apps" => "apps",
        "rbac.authorization.k8s.io" => "rbac",
        "policy" => "policy",
        "coordination.k8s.io" => "coordination",
        "events.k8s.io" => "events",
        "networking.k8s.io" => "networking",
        "discovery.k8s.io" => "discovery",
        "authentication.k8s.io" => "authentication",
        "authorization.k8s.io" => "authorization",
        "autoscaling" => "autoscaling",
        "apiextensions.k8s.io" => "apiextensions",
        "meta.k8s.io" => "meta",
        _ => return None,
    })
}

/// The message of an `apiVersion`/`kind`: the kind in its group's package, else the shared
/// `meta.v1` kinds every group serves (`Status`, `DeleteOptions`, `WatchEvent`, ...).
pub fn message_for(api_version: &str, kind: &str) -> Option<(&'static str, &'static Message)> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let table = messages();
    // Built by hand: every write of a built-in type looks its message up.
    let name = |parts: &[&str]| {
        let mut s = String::with_capacity(parts.iter().map(|p| p.len()).sum());
        parts.iter().for_each(|p| s.push_str(p));
        s
    };
    let own = package_of(group).map(|p| name(&[p, ".", version, ".", kind]));
    let meta = name(&["meta.v1.", kind]);
    own.iter()
        .chain(std::iter::once(&meta))
        .find_map(|name| table.get_key_value(name.as_str()))
        .map(|(k, m)| (k.as_str(), m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_schema_parses_and_knows_the_served_kinds() {
        let table = parse(SCHEMA).expect("parses");
        assert!(table.len() > 300, "{}", table.len());
        for (av, kind) in [
            ("v1", "Pod"),
            ("v1", "PodList"),
            ("v1", "Secret"),
            ("v1", "Status"),
            ("v1", "DeleteOptions"),
            ("apps/v1", "Deployment"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
            ("policy/v1", "PodDisruptionBudget"),
            ("coordination.k8s.io/v1", "Lease"),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            ("authentication.k8s.io/v1", "TokenRequest"),
            ("autoscaling/v1", "Scale"),
        ] {
            assert!(message_for(av, kind).is_some(), "{av} {kind}");
        }
        assert!(message_for("sparkoperator.k8s.io/v1beta2", "SparkApplication").is_none());
        let meta = &table["meta.v1.ObjectMeta"];
        let created = meta.by_number(8).expect("creationTimestamp");
        assert_eq!(created.json.as_deref(), Some("creationTimestamp"));
        assert_eq!(created.ty, Type::Message("meta.v1.Time".into()));
        let volume = &table["core.v1.Volume"];
        assert_eq!(
            volume.by_number(2).and_then(|f| f.json.clone()),
            None,
            "inlined VolumeSource"
        );
        let replicas = table["apps.v1.DeploymentSpec"]
            .by_number(1)
            .expect("replicas");
        assert!(replicas.pointer);
    }
}
