//! The service's JSON log lines, written by a layer of our own: the lines of tracing-subscriber's
//! JSON formatter (`fmt::layer().json()`), key for key and byte for byte but for the time (a
//! test below holds both to that), at a fraction of its cost.
//!
//! Why not that formatter: it keeps a span's fields as JSON text, so it parses them back into a
//! map at every event (for `span` and for each of `spans`) and at every later `record` on the
//! span, and it gathers a span's fields into a map of `serde_json::Value`s before writing them.
//! A submission opens two spans, records on one and writes an audit line: on a cached duplicate
//! that was about a fifth of the instructions. Here a span keeps each field's value already
//! written as JSON, and a line is written straight into one reused buffer.

use std::cell::RefCell;
use std::fmt;
use std::io::Write as _;

use serde::Serializer as _;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

/// The layer: one JSON object a line, to what `W` makes.
pub struct JsonLines<W> {
    make_writer: W,
    /// Whether lines carry `span` and `spans` (the audit file's do not).
    spans: bool,
}

impl<W> JsonLines<W> {
    /// Lines with their spans, as `fmt::layer().json().with_writer(make_writer)`.
    pub fn new(make_writer: W) -> JsonLines<W> {
        JsonLines {
            make_writer,
            spans: true,
        }
    }

    /// Lines without `span` and `spans`, as `.with_current_span(false).with_span_list(false)`.
    pub fn without_spans(self) -> JsonLines<W> {
        JsonLines {
            spans: false,
            ..self
        }
    }
}

/// A span's fields: each name with its value as JSON, in name order (the formatter's map is
/// sorted); a field recorded again replaces its value.
#[derive(Debug, Default)]
struct SpanFields(Vec<(&'static str, String)>);

impl SpanFields {
    fn set(&mut self, name: &'static str, json: String) {
        match self.0.binary_search_by(|(n, _)| n.cmp(&name)) {
            Ok(i) => self.0[i].1 = json,
            Err(i) => self.0.insert(i, (name, json)),
        }
    }
}

/// Records span fields as the formatter's `JsonVisitor` does (its `log.` and `r#` rules too).
impl Visit for SpanFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.name(), serde_json::Value::from(value).to_string());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), value.to_string());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), value.to_string());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), json_string(value));
    }

    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        self.set(field.name(), serde_json::Value::from(value).to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.set(name, json_string(&format!("{value:?}")));
    }
}

fn json_string(value: &str) -> String {
    // Serialising a string cannot fail.
    serde_json::to_string(value).unwrap_or_default()
}

/// `value` as a JSON string, escaped as serde_json escapes it.
fn write_str(out: &mut Vec<u8>, value: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(out, value);
}

/// Writes an event's fields as tracing-serde's map visitor does: in the order they are recorded,
/// every one of them, a `Debug` value as its text.
struct EventFields<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl EventFields<'_> {
    fn key(&mut self, field: &Field) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_str(self.out, field.name());
        self.out.push(b':');
    }
}

impl Visit for EventFields<'_> {
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        let _ = serde_json::Serializer::new(&mut *self.out).collect_str(&format_args!("{value:?}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        let _ = serde_json::to_writer(&mut *self.out, &value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        let _ = serde_json::to_writer(&mut *self.out, &value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        let _ = serde_json::to_writer(&mut *self.out, &value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        write_str(self.out, value);
    }
}

/// `{fields…,"name":…}` of one span, as the formatter writes it.
fn write_span<S: for<'a> LookupSpan<'a>>(out: &mut Vec<u8>, span: &SpanRef<'_, S>) {
    out.push(b'{');
    if let Some(fields) = span.extensions().get::<SpanFields>() {
        for (name, json) in &fields.0 {
            write_str(out, name);
            out.push(b':');
            out.extend_from_slice(json.as_bytes());
            out.push(b',');
        }
    }
    out.extend_from_slice(b"\"name\":");
    write_str(out, span.metadata().name());
    out.push(b'}');
}

thread_local! {
    /// The line being written: one buffer a thread, kept between events.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl<S, W> Layer<S> for JsonLines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = SpanFields::default();
        attrs.record(&mut fields);
        span.extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(fields) = extensions.get_mut::<SpanFields>() {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        LINE.with(|line| {
            // An event logged while this thread writes a line (from inside a field's Debug)
            // gets a buffer of its own.
            let mut own = Vec::new();
            let mut borrowed = line.try_borrow_mut();
            let out = match borrowed.as_deref_mut() {
                Ok(line) => line,
                Err(_) => &mut own,
            };
            out.clear();
            self.write_line(out, event, &ctx);
            let _ = self.make_writer.make_writer().write_all(out);
        });
    }
}

impl<W> JsonLines<W> {
    fn write_line<S: Subscriber + for<'a> LookupSpan<'a>>(
        &self,
        out: &mut Vec<u8>,
        event: &Event<'_>,
        ctx: &Context<'_, S>,
    ) {
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let mut time = String::with_capacity(32);
        let _ = SystemTime.format_time(&mut Writer::new(&mut time));
        out.extend_from_slice(b"{\"timestamp\":");
        write_str(out, &time);
        out.extend_from_slice(b",\"level\":\"");
        out.extend_from_slice(meta.level().as_str().as_bytes());
        out.extend_from_slice(b"\",\"fields\":{");
        event.record(&mut EventFields {
            out: &mut *out,
            first: true,
        });
        out.extend_from_slice(b"},\"target\":");
        write_str(out, meta.target());
        if self.spans {
            let current = event
                .parent()
                .and_then(|id| ctx.span(id))
                .or_else(|| ctx.lookup_current());
            if let Some(current) = current {
                out.extend_from_slice(b",\"span\":");
                write_span(out, &current);
                out.extend_from_slice(b",\"spans\":[");
                if let Some(leaf) = ctx.lookup_current() {
                    for (i, span) in leaf.scope().from_root().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        write_span(out, &span);
                    }
                }
                out.push(b']');
            }
        }
        out.extend_from_slice(b"}\n");
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// A log writer into memory, for the tests of what is logged.
    #[derive(Clone, Default)]
    pub(crate) struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    impl Buffer {
        /// Everything written.
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }

        /// The lines, each with its time cut out (the two layers read the clock apart).
        fn lines(&self) -> Vec<String> {
            self.text()
                .lines()
                .map(|line| {
                    let value: serde_json::Value = serde_json::from_str(line).expect("JSON");
                    assert!(
                        value["timestamp"]
                            .as_str()
                            .is_some_and(|t| t.ends_with('Z'))
                    );
                    let end = line.find(",\"level\"").expect("a level after the time");
                    line[end..].to_owned()
                })
                .collect()
        }
    }

    #[derive(Debug)]
    struct Odd;

    impl fmt::Display for Odd {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("tab\tquote\" back\\ bell\u{7} é")
        }
    }

    fn log_everything() {
        tracing::info!("no span yet");
        let request =
            tracing::info_span!("request", method = "POST", path = "/a\"b", request_id = "");
        let _request = request.enter();
        let submit = tracing::info_span!("submit", submission_id = "s-1", namespace = tracing::field::Empty,
                                         pod = tracing::field::Empty, zeta = 1u64, r#type = ?Odd);
        let _submit = submit.enter();
        tracing::warn!(count = 3i64, big = u64::MAX, ratio = 0.25, nan = f64::NAN, on = true,
                       text = "line\nbreak", shown = %Odd, debugged = ?Odd, "first {}", 1);
        tracing::record_all!(submit, namespace = "ns", pod = "driver");
        submit.record("zeta", 2u64);
        submit.record("namespace", "other");
        tracing::info!(target: "submitter::audit", action = "submit", duplicate = false, status = 201u16, "audit");
        let error = std::io::Error::other("disk \"full\"");
        tracing::error!(
            error = &error as &(dyn std::error::Error + 'static),
            "failed"
        );
        let detached = tracing::info_span!(parent: None, "detached", k = "v");
        tracing::info!(parent: &detached, "with an explicit parent");
        drop(_submit);
        tracing::debug!(bytes = ?b"ab".as_slice(), "back in the request span");
    }

    #[test]
    fn the_lines_are_the_json_formatters_lines() {
        let (ours, theirs) = (Buffer::default(), Buffer::default());
        let subscriber = tracing_subscriber::registry()
            .with(JsonLines::new(ours.clone()))
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(theirs.clone()),
            );
        tracing::subscriber::with_default(subscriber, log_everything);
        let (ours, theirs) = (ours.lines(), theirs.lines());
        assert_eq!(ours.len(), 6);
        assert_eq!(ours, theirs);
    }

    #[test]
    fn without_spans_the_lines_are_the_formatters_without_spans() {
        let (ours, theirs) = (Buffer::default(), Buffer::default());
        let subscriber = tracing_subscriber::registry()
            .with(JsonLines::new(ours.clone()).without_spans())
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_writer(theirs.clone()),
            );
        tracing::subscriber::with_default(subscriber, log_everything);
        let (ours, theirs) = (ours.lines(), theirs.lines());
        assert!(ours.iter().all(|line| !line.contains("\"spans\"")));
        assert_eq!(ours, theirs);
    }
}
