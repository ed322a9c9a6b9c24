//! What a submission reads of an object the API server answered a create with ([`Head`]), and
//! [`read`], which stops reading the answer once its `metadata` is read: the rest (a pod's spec
//! and status, a ConfigMap's data) is never scanned. Skipping unread JSON is not free: it was
//! about a tenth of a fresh submission's instructions, most of it in these answers.

use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};

/// What a submission reads of an object the API server answered with: its uid, and for the
/// driver pod its creation time and Spark app id label. The rest of the answer is skipped
/// unread.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Head {
    #[serde(default)]
    pub uid: String,
    pub creation_timestamp: Option<String>,
    /// The `spark-app-selector` label; the other labels are not kept.
    #[serde(default, rename = "labels", deserialize_with = "spark_app_id_label")]
    pub spark_app_id: Option<String>,
}

/// Of a `labels` map, the Spark app id's value only.
fn spark_app_id_label<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    struct SparkAppId;
    impl<'de> Visitor<'de> for SparkAppId {
        type Value = Option<String>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of labels")
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<String>, E> {
            Ok(None)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
            let mut found = None;
            while let Some(wanted) =
                map.next_key_seed(KeyIs(submission::meta::labels::SPARK_APP_ID))?
            {
                if wanted {
                    found = Some(map.next_value::<String>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    deserializer.deserialize_any(SparkAppId)
}

/// Reads a map key as whether it is `.0`, without copying it.
struct KeyIs(&'static str);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// The [`Head`] of an answer: its `metadata`'s, or an empty one when there is none, as a whole
/// decode of `{"metadata": Head}` would give. Once `metadata` is read the rest is left unread, and
/// so unchecked: a success answer of the API server is JSON, and nothing else of it is used.
pub fn read(answer: &str) -> Result<Head, serde_json::Error> {
    let mut head = None;
    let mut deserializer = serde_json::Deserializer::from_str(answer);
    match (ToMetadata { head: &mut head }).deserialize(&mut deserializer) {
        Ok(()) => deserializer.end().map(|()| Head::default()),
        // The stop below, the one way out with a head.
        Err(_) if head.is_some() => Ok(head.unwrap_or_default()),
        Err(error) => Err(error),
    }
}

/// Stops the decode once `metadata` is read. serde_json checks that a map was read to its end
/// after its visitor returns, so the only way out early is an error; [`read`] tells it from a
/// real one by the head it left behind.
const STOP: &str = "stopped after metadata";

/// Reads the top-level map up to `metadata`, keeping what it reads in `head`.
struct ToMetadata<'a> {
    head: &'a mut Option<Head>,
}

impl<'de> DeserializeSeed<'de> for ToMetadata<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ToMetadata<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(is_metadata) = map.next_key_seed(KeyIs("metadata"))? {
            if is_metadata {
                *self.head = Some(map.next_value::<Option<Head>>()?.unwrap_or_default());
                return Err(A::Error::custom(STOP));
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// What a whole decode gives: the oracle [`read`] must agree with.
    #[derive(serde::Deserialize)]
    struct Whole {
        #[serde(default)]
        metadata: Head,
    }

    #[test]
    fn an_answer_head_keeps_uid_creation_time_and_the_spark_app_id_label_only() {
        let answer = r#"{"kind":"Pod","metadata":{"name":"d","uid":"u-1",
            "creationTimestamp":"2026-12-04T10:00:00Z","managedFields":[{"manager":"x"}],
            "labels":{"a":"1","spark-app-selector":"spark-42","z":"2"}},"spec":{}}"#;
        assert_eq!(
            read(answer).expect("a pod answer"),
            Head {
                uid: "u-1".into(),
                creation_timestamp: Some("2026-12-04T10:00:00Z".into()),
                spark_app_id: Some("spark-42".into()),
            }
        );
        let unlabelled =
            read(r#"{"metadata":{"uid":"u-2","labels":null}}"#).expect("an answer without labels");
        assert_eq!(unlabelled.spark_app_id, None);
    }

    #[test]
    fn what_follows_the_metadata_is_not_read() {
        // Not JSON after the metadata: a whole decode fails, the head is read all the same.
        let answer = r#"{"metadata":{"uid":"u-3"},"spec":{"containers": [nonsense"#;
        assert!(serde_json::from_str::<Whole>(answer).is_err());
        assert_eq!(read(answer).expect("stops before the spec").uid, "u-3");
    }

    #[test]
    fn an_answer_that_is_not_an_object_or_has_a_bad_metadata_is_an_error() {
        for answer in [
            "",
            "[]",
            "nonsense",
            r#"{"metadata":{"uid":7}}"#,
            r#"{"kind":"Pod""#,
            "{} x",
        ] {
            assert!(read(answer).is_err(), "{answer}");
        }
    }

    fn label() -> impl Strategy<Value = (String, String)> {
        (
            prop_oneof!["[a-z]{1,3}", Just("spark-app-selector".to_owned())],
            "[a-z0-9-]{0,6}",
        )
    }

    fn metadata() -> impl Strategy<Value = Value> {
        (
            proptest::option::of("[a-z0-9-]{1,8}"),
            proptest::option::of(Just("2026-12-05T00:00:00Z")),
            proptest::option::of(proptest::collection::vec(label(), 0..4)),
            any::<bool>(),
        )
            .prop_map(|(uid, created, labels, managed)| {
                let mut meta = serde_json::Map::new();
                meta.insert("name".into(), json!("n"));
                if let Some(uid) = uid {
                    meta.insert("uid".into(), json!(uid));
                }
                if let Some(created) = created {
                    meta.insert("creationTimestamp".into(), json!(created));
                }
                if let Some(labels) = labels {
                    let labels: serde_json::Map<String, Value> =
                        labels.into_iter().map(|(k, v)| (k, json!(v))).collect();
                    meta.insert("labels".into(), Value::Object(labels));
                }
                if managed {
                    meta.insert(
                        "managedFields".into(),
                        json!([{"manager": "m", "fieldsV1": {"f:data": {}}}]),
                    );
                }
                Value::Object(meta)
            })
    }

    proptest! {
        #[test]
        fn the_head_read_is_the_head_of_a_whole_decode(
            meta in proptest::option::of(metadata()),
            before in any::<bool>(),
            after in any::<bool>(),
        ) {
            let mut answer = serde_json::Map::new();
            if before {
                answer.insert("apiVersion".into(), json!("v1"));
                answer.insert("data".into(), json!({"spark.properties": "a=b\\n"}));
            }
            if let Some(meta) = meta {
                answer.insert("metadata".into(), meta);
            }
            if after {
                answer.insert("spec".into(), json!({"containers": [{"name": "c", "args": ["x"]}]}));
            }
            let text = Value::Object(answer).to_string();
            let whole: Whole = serde_json::from_str(&text).expect("the oracle decodes");
            prop_assert_eq!(read(&text).expect("read"), whole.metadata);
        }
    }
}
