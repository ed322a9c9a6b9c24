//! Kubernetes label and field selectors (`?labelSelector=` / `?fieldSelector=`).
//!
//! The grammar and the error texts follow `k8s.io/apimachinery/pkg/labels` and
//! `k8s.io/apimachinery/pkg/fields` closely, because clients surface the
//! server's message verbatim and tests sometimes match on it.

use serde_json::{Map, Value};

/// Why a selector string was rejected or a field is unsupported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The label selector string does not follow the Kubernetes grammar.
    #[error("{0}")]
    InvalidLabelSelector(String),
    /// The field selector string does not follow the Kubernetes grammar.
    #[error("{0}")]
    InvalidFieldSelector(String),
    /// The field selector names a field the resource does not index.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

impl SelectorError {
    /// Stable machine-readable name of the error variant.
    pub fn kind(&self) -> &'static str {
        match self {
            SelectorError::InvalidLabelSelector(_) => "invalid_label_selector",
            SelectorError::InvalidFieldSelector(_) => "invalid_field_selector",
            SelectorError::UnsupportedField(_) => "unsupported_field",
        }
    }
}

/// Operator of one label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOperator {
    /// `key=value` or `key==value`.
    Equals,
    /// `key!=value` (also true when the label is absent).
    NotEquals,
    /// `key in (v1,v2)`.
    In,
    /// `key notin (v1,v2)` (also true when the label is absent).
    NotIn,
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
    /// `key>N` (integer comparison).
    GreaterThan,
    /// `key<N` (integer comparison).
    LessThan,
}

/// One comma-separated term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub op: LabelOperator,
    /// Operand values (empty for `Exists` / `DoesNotExist`).
    pub values: Vec<String>,
}

impl LabelRequirement {
    fn matches(&self, labels: &Map<String, Value>) -> bool {
        let actual = labels.get(&self.key).map(value_as_string);
        match self.op {
            LabelOperator::Equals | LabelOperator::In => {
                actual.is_some_and(|a| self.values.contains(&a))
            }
            LabelOperator::NotEquals | LabelOperator::NotIn => {
                actual.is_none_or(|a| !self.values.contains(&a))
            }
            LabelOperator::Exists => actual.is_some(),
            LabelOperator::DoesNotExist => actual.is_none(),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                let Some(a) = actual.and_then(|a| a.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(b) = self.values.first().and_then(|b| b.parse::<i64>().ok()) else {
                    return false;
                };
                if self.op == LabelOperator::GreaterThan {
                    a > b
                } else {
                    a < b
                }
            }
        }
    }
}

/// A parsed label selector; all requirements must hold (logical AND).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Bang,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    OpenPar,
    ClosePar,
    Comma,
    End,
}

impl Token {
    /// The literal as Kubernetes prints it in `found '...'` messages.
    fn literal(&self) -> &str {
        match self {
            Token::Ident(s) => s,
            Token::Bang => "!",
            Token::Eq => "=",
            Token::DoubleEq => "==",
            Token::NotEq => "!=",
            Token::Gt => ">",
            Token::Lt => "<",
            Token::OpenPar => "(",
            Token::ClosePar => ")",
            Token::Comma => ",",
            Token::End => "",
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn lex(input: &str) -> Vec<Token> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let (tok, len) = match (c, next) {
            ('=', Some('=')) => (Token::DoubleEq, 2),
            ('!', Some('=')) => (Token::NotEq, 2),
            ('=', _) => (Token::Eq, 1),
            ('!', _) => (Token::Bang, 1),
            ('>', _) => (Token::Gt, 1),
            ('<', _) => (Token::Lt, 1),
            ('(', _) => (Token::OpenPar, 1),
            (')', _) => (Token::ClosePar, 1),
            (',', _) => (Token::Comma, 1),
            _ => {
                let start = i;
                let mut end = i;
                while end < chars.len() && !chars[end].is_whitespace() && !is_special(chars[end]) {
                    end += 1;
                }
                (
                    Token::Ident(chars[start..end].iter().collect()),
                    end - start,
                )
            }
        };
        out.push(tok);
        i += len;
    }
    out.push(Token::End);
    out
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        self.tokens.get(self.pos).unwrap_or(&Token::End)
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut reqs = Vec::new();
        loop {
            match self.peek() {
                Token::Ident(_) | Token::Bang => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    match self.next() {
                        Token::End => return Ok(reqs),
                        Token::Comma => match self.peek() {
                            Token::Ident(_) | Token::Bang => {}
                            t => {
                                return Err(format!(
                                    "found '{}', expected: identifier after ','",
                                    t.literal()
                                ));
                            }
                        },
                        t => {
                            return Err(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                t.literal()
                            ));
                        }
                    }
                }
                Token::End => return Ok(reqs),
                t => {
                    return Err(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        t.literal()
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<LabelRequirement, String> {
        let mut negated = false;
        let mut tok = self.next();
        if tok == Token::Bang {
            negated = true;
            tok = self.next();
        }
        let Token::Ident(key) = tok else {
            return Err(format!("found '{}', expected: identifier", tok.literal()));
        };
        validate_label_key(&key)?;
        let at_term_end = matches!(self.peek(), Token::End | Token::Comma);
        if negated {
            if !at_term_end {
                return Err(format!(
                    "found '{}', expected: ',' or 'end of string'",
                    self.peek().literal()
                ));
            }
            return Ok(LabelRequirement {
                key,
                op: LabelOperator::DoesNotExist,
                values: vec![],
            });
        }
        if at_term_end {
            return Ok(LabelRequirement {
                key,
                op: LabelOperator::Exists,
                values: vec![],
            });
        }
        let op = match self.next() {
            Token::Eq | Token::DoubleEq => LabelOperator::Equals,
            Token::NotEq => LabelOperator::NotEquals,
            Token::Gt => LabelOperator::GreaterThan,
            Token::Lt => LabelOperator::LessThan,
            Token::Ident(s) if s == "in" => LabelOperator::In,
            Token::Ident(s) if s == "notin" => LabelOperator::NotIn,
            t => {
                return Err(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    t.literal()
                ));
            }
        };
        let values = match op {
            LabelOperator::In | LabelOperator::NotIn => self.value_set()?,
            _ => vec![self.exact_value()?],
        };
        for v in &values {
            validate_label_value(v)?;
        }
        if matches!(op, LabelOperator::GreaterThan | LabelOperator::LessThan)
            && values.iter().any(|v| v.parse::<i64>().is_err())
        {
            return Err(format!(
                "for 'Gt', 'Lt' operators, the value must be an integer: {:?}",
                values.first().map(String::as_str).unwrap_or("")
            ));
        }
        Ok(LabelRequirement { key, op, values })
    }

    fn exact_value(&mut self) -> Result<String, String> {
        // `a=` is legal and means "label a has the empty value".
        match self.peek() {
            Token::End | Token::Comma => Ok(String::new()),
            _ => match self.next() {
                Token::Ident(v) => Ok(v),
                t => Err(format!("found '{}', expected: identifier", t.literal())),
            },
        }
    }

    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let t = self.next();
        if t != Token::OpenPar {
            return Err(format!("found '{}', expected: '('", t.literal()));
        }
        let mut values = Vec::new();
        // Kubernetes accepts empty slots (`()`, `(a,)`) as the empty value.
        let mut expect_value = true;
        loop {
            match self.next() {
                Token::Ident(v) if expect_value => {
                    values.push(v);
                    expect_value = false;
                }
                Token::Comma => {
                    if expect_value {
                        values.push(String::new());
                    }
                    expect_value = true;
                }
                Token::ClosePar => {
                    if expect_value {
                        values.push(String::new());
                    }
                    return Ok(values);
                }
                t => {
                    return Err(format!(
                        "found '{}', expected: ',', ')' or identifier",
                        t.literal()
                    ));
                }
            }
        }
    }
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// Kubernetes "qualified name" part / label value shape.
fn is_name_part(s: &str) -> bool {
    let first_last_ok =
        s.chars().next().is_some_and(is_alnum) && s.chars().last().is_some_and(is_alnum);
    first_last_ok
        && s.chars()
            .all(|c| is_alnum(c) || matches!(c, '-' | '_' | '.'))
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            label
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && label
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

const NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn validate_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && !is_dns_subdomain(p)
    {
        return Err(format!(
            "invalid label key {key:?}: prefix part must be a lowercase RFC 1123 subdomain"
        ));
    }
    if name.is_empty() || name.len() > 63 {
        return Err(format!(
            "invalid label key {key:?}: name part must be non-empty and no more than 63 characters"
        ));
    }
    if !is_name_part(name) {
        return Err(format!("invalid label key {key:?}: name part {NAME_RULE}"));
    }
    Ok(())
}

fn validate_label_value(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err(format!(
            "invalid label value: {value:?}: must be no more than 63 characters"
        ));
    }
    if !value.is_empty() && !is_name_part(value) {
        return Err(format!(
            "invalid label value: {value:?}: a valid label {NAME_RULE}"
        ));
    }
    Ok(())
}

fn value_as_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl LabelSelector {
    /// Parses the Kubernetes label selector syntax; the empty string matches everything.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            tokens: lex(input),
            pos: 0,
        };
        let requirements = parser
            .parse()
            .map_err(SelectorError::InvalidLabelSelector)?;
        Ok(LabelSelector { requirements })
    }

    /// Whether the selector has no requirements (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The parsed requirements, in input order.
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// Whether `labels` (an object's `metadata.labels`) satisfies every requirement.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The selector a `metav1.LabelSelector` object describes (`matchLabels` and
    /// `matchExpressions` with `In`, `NotIn`, `Exists`, `DoesNotExist`); `None` for an unknown
    /// operator. An empty object selects everything, as in Kubernetes.
    pub fn from_label_selector(sel: &Value) -> Option<Self> {
        let mut requirements = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                requirements.push(LabelRequirement {
                    key: k.clone(),
                    op: LabelOperator::Equals,
                    values: vec![value_as_string(v)],
                });
            }
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e.get("key").and_then(Value::as_str)?.to_string();
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(value_as_string).collect())
                .unwrap_or_default();
            let op = match e.get("operator").and_then(Value::as_str)? {
                "In" => LabelOperator::In,
                "NotIn" => LabelOperator::NotIn,
                "Exists" => LabelOperator::Exists,
                "DoesNotExist" => LabelOperator::DoesNotExist,
                _ => return None,
            };
            requirements.push(LabelRequirement { key, op, values });
        }
        Some(Self { requirements })
    }

    /// Convenience: matches against a whole object's `metadata.labels` (absent = no labels).
    pub fn matches_object(&self, obj: &Value) -> bool {
        let empty = Map::new();
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        self.matches(labels)
    }
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// Dotted field path, e.g. `spec.nodeName`.
    pub field: String,
    /// `true` for `!=`, `false` for `=` / `==`.
    pub negated: bool,
    /// Unescaped operand.
    pub value: String,
}

/// A parsed field selector; all requirements must hold (logical AND).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

/// Splits on commas not preceded by a backslash escape.
fn split_terms(s: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ',' => terms.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    terms.push(cur);
    terms
}

/// Finds the first unescaped operator, longest operators first at each position.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    let mut escaped = false;
    for (i, c) in term.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
            continue;
        }
        let rest = &term[i..];
        for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
            if rest.starts_with(op) {
                return Some((&term[..i], negated, &term[i + op.len()..]));
            }
        }
    }
    None
}

fn unescape_field_value(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('\\' | ',' | '=')) => out.push(n),
                Some(n) => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{n}"
                    ));
                }
                None => {
                    return Err("invalid field selector: invalid escape sequence: \\".to_string());
                }
            },
            ',' | '=' => return Err(format!("invalid field selector: unescaped character {c}")),
            _ => out.push(c),
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses `a.b=v`, `a.b==v`, `a.b!=v` terms separated by commas; the empty string matches everything.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_terms(input) {
            if part.trim().is_empty() {
                continue;
            }
            let invalid = || {
                SelectorError::InvalidFieldSelector(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                ))
            };
            let (lhs, negated, rhs) = split_term(&part).ok_or_else(invalid)?;
            let field = lhs.trim();
            if field.is_empty() {
                return Err(invalid());
            }
            let value =
                unescape_field_value(rhs.trim()).map_err(SelectorError::InvalidFieldSelector)?;
            requirements.push(FieldRequirement {
                field: field.to_string(),
                negated,
                value,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether the selector has no requirements (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The parsed requirements, in input order.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// The value an `=`/`==` term pins `field` to, e.g. for `spec.nodeName=n1` lookups.
    pub fn equals_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| !r.negated && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// Whether `obj` satisfies every term; missing fields compare as `""`.
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let actual = r
                .field
                .split('.')
                .try_fold(obj, |v, seg| v.get(seg))
                .map(value_as_string)
                .unwrap_or_default();
            (actual == r.value) != r.negated
        })
    }

    /// Rejects terms on fields outside `allowed`, as the apiserver does per resource.
    pub fn validate_fields(&self, allowed: &[&str]) -> Result<(), SelectorError> {
        match self
            .requirements
            .iter()
            .find(|r| !allowed.contains(&r.field.as_str()))
        {
            Some(r) => Err(SelectorError::UnsupportedField(r.field.clone())),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn label_selector_table() {
        let l = labels(json!({"app": "web", "tier": "front", "n": "5", "example.com/x": "y"}));
        let cases: &[(&str, bool)] = &[
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app = web", true),
            ("app=db", false),
            ("app!=db", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("app in (web, db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("app notin (web,db)", false),
            ("missing notin (x)", true),
            ("missing in (x)", false),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier=front", true),
            ("app=web, tier=back", false),
            ("  app  ,  !missing  ", true),
            ("n>3", true),
            ("n<3", false),
            ("example.com/x=y", true),
            ("missing=", false),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&l), *want, "selector {sel:?}");
        }
        let empty_label = labels(json!({"a": ""}));
        assert!(LabelSelector::parse("a=").unwrap().matches(&empty_label));
        assert!(
            LabelSelector::parse("a in ()")
                .unwrap()
                .matches(&empty_label)
        );
    }

    #[test]
    fn label_selector_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "a in x",
                "unable to parse requirement: found 'x', expected: '('",
            ),
            (
                "=b",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            ("a=b=c", "found '=', expected: ',' or 'end of string'"),
            ("a=b,", "found '', expected: identifier after ','"),
            (
                "!a=b",
                "unable to parse requirement: found '=', expected: ',' or 'end of string'",
            ),
            (
                "a in (x",
                "unable to parse requirement: found '', expected: ',', ')' or identifier",
            ),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            ("-a=b", "unable to parse requirement: invalid label key"),
            ("a=-b", "unable to parse requirement: invalid label value"),
            ("Bad_Prefix/a=b", "prefix part"),
            ("n>x", "must be an integer"),
        ];
        for (sel, msg) in cases {
            let err = LabelSelector::parse(sel).expect_err(sel);
            assert_eq!(err.kind(), "invalid_label_selector");
            assert!(err.to_string().contains(msg), "{sel:?}: got {err}");
        }
    }

    #[test]
    fn matches_object_uses_metadata_labels() {
        let s = LabelSelector::parse("app=web").unwrap();
        assert!(s.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})));
        assert!(!s.matches_object(&json!({"metadata": {}})));
        assert!(
            LabelSelector::parse("!app")
                .unwrap()
                .matches_object(&json!({}))
        );
    }

    #[test]
    fn field_selector_table() {
        let pod = json!({
            "metadata": {"name": "p1", "namespace": "default"},
            "spec": {"nodeName": "n1", "unschedulable": true},
            "status": {"phase": "Running"},
        });
        let unscheduled = json!({"metadata": {"name": "p2"}, "spec": {}});
        let cases: &[(&str, &Value, bool)] = &[
            ("", &pod, true),
            ("metadata.name=p1", &pod, true),
            ("metadata.name==p1", &pod, true),
            ("metadata.name!=p1", &pod, false),
            ("metadata.name=p1,status.phase=Running", &pod, true),
            ("metadata.name=p1,status.phase!=Running", &pod, false),
            ("spec.nodeName=", &pod, false),
            ("spec.nodeName=", &unscheduled, true),
            ("spec.nodeName!=", &unscheduled, false),
            ("spec.unschedulable=true", &pod, true),
            (
                "metadata.name=a\\,b",
                &json!({"metadata": {"name": "a,b"}}),
                true,
            ),
        ];
        for (sel, obj, want) in cases {
            let s = FieldSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(obj), *want, "selector {sel:?}");
        }
    }

    #[test]
    fn field_selector_errors_and_validation() {
        for sel in ["foo", "=x", "a=b=c", "a=b\\q"] {
            let err = FieldSelector::parse(sel).expect_err(sel);
            assert_eq!(err.kind(), "invalid_field_selector", "{sel}");
        }
        assert_eq!(
            FieldSelector::parse("foo").unwrap_err().to_string(),
            "invalid selector: 'foo'; can't understand 'foo'"
        );
        let s = FieldSelector::parse("metadata.name=a,foo=b").unwrap();
        assert_eq!(s.equals_value("metadata.name"), Some("a"));
        let err = s
            .validate_fields(&["metadata.name", "metadata.namespace"])
            .unwrap_err();
        assert_eq!(err.to_string(), "field label not supported: foo");
        assert_eq!(err.kind(), "unsupported_field");
        assert!(s.validate_fields(&["metadata.name", "foo"]).is_ok());
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = LabelSelector::parse(&s).map(|sel| sel.matches(&Map::new()));
            let _ = FieldSelector::parse(&s).map(|sel| sel.matches(&json!({"a": {"b": 1}})));
        }

        #[test]
        fn parse_never_panics_on_selector_alphabet(s in "[a-z=!(),<> \\\\.]{0,30}") {
            let _ = LabelSelector::parse(&s).map(|sel| sel.matches(&Map::new()));
            let _ = FieldSelector::parse(&s).map(|sel| sel.matches(&Value::Null));
        }
    }
}
