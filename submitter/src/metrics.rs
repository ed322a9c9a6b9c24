//! The service's Prometheus metrics: one registry, label values from fixed sets only.
//!
//! The route label comes from [`route_label`], a closed list, never from the request path, so
//! a client probing random URLs cannot grow the series count; status codes are bounded by HTTP.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use submission::api::{DRIVERS_PATH, LOG_SEGMENT, SUBMIT_PATH};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    method: &'static str,
    code: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

/// Every metric of the service.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    in_flight: Gauge,
    duplicates: Counter,
    rollbacks: Counter,
    swept: Counter,
    sweep_passes: Counter,
    log_streams: Gauge,
    log_bytes: Counter,
    kills: Counter,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("submitter");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route, method and status code",
            requests.clone(),
        );
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.005, 2.0, 14))) as fn() -> Histogram,
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request, by route",
            latency.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "http_requests_in_flight",
            "HTTP requests being served",
            in_flight.clone(),
        );
        let duplicates = Counter::default();
        registry.register(
            "duplicate_submissions",
            "Submissions answered with an existing driver (200, duplicate_submission)",
            duplicates.clone(),
        );
        let rollbacks = Counter::default();
        registry.register(
            "rollbacks",
            "Failed first attempts whose objects were removed",
            rollbacks.clone(),
        );
        let swept = Counter::default();
        registry.register(
            "swept_config_maps",
            "ConfigMaps removed by the sweeper because their driver pod never came",
            swept.clone(),
        );
        let sweep_passes = Counter::default();
        registry.register(
            "sweep_passes",
            "Completed passes of the sweeper over the watch caches",
            sweep_passes.clone(),
        );
        let log_streams = Gauge::default();
        registry.register(
            "log_streams_open",
            "Driver log streams open now (each holds its client's connection)",
            log_streams.clone(),
        );
        let log_bytes = Counter::default();
        registry.register(
            "log_bytes_streamed",
            "Bytes of driver logs passed on to clients",
            log_bytes.clone(),
        );
        let kills = Counter::default();
        registry.register(
            "kills",
            "Drivers killed through the service (each driver once)",
            kills.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            in_flight,
            duplicates,
            rollbacks,
            swept,
            sweep_passes,
            log_streams,
            log_bytes,
            kills,
        }
    }

    pub fn duplicate(&self) {
        self.duplicates.inc();
    }

    pub fn rollback(&self) {
        self.rollbacks.inc();
    }

    pub fn swept(&self) {
        self.swept.inc();
    }

    pub fn sweep_pass(&self) {
        self.sweep_passes.inc();
    }

    pub fn log_stream_opened(&self) {
        self.log_streams.inc();
    }

    pub fn log_stream_closed(&self) {
        self.log_streams.dec();
    }

    /// Log streams open now.
    pub fn log_streams_open(&self) -> i64 {
        self.log_streams.get()
    }

    pub fn log_bytes(&self, bytes: usize) {
        self.log_bytes
            .inc_by(u64::try_from(bytes).unwrap_or(u64::MAX));
    }

    pub fn kill(&self) {
        self.kills.inc();
    }

    /// Completed sweep passes: a test's barrier ("a whole pass ran after this point").
    pub fn sweep_passes(&self) -> u64 {
        self.sweep_passes.get()
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// The route label of a request: one of a fixed set.
pub fn route_label(method: &http::Method, path: &str) -> &'static str {
    let delete = *method == http::Method::DELETE;
    if path == SUBMIT_PATH {
        return if *method == http::Method::GET {
            "list"
        } else {
            "submit"
        };
    }
    let (by_submission, rest) = match (
        path.strip_prefix(SUBMIT_PATH),
        path.strip_prefix(DRIVERS_PATH),
    ) {
        (Some(rest), _) if rest.starts_with('/') => (true, rest),
        (_, Some(rest)) if rest.starts_with('/') => (false, rest),
        _ => return "other",
    };
    let log = rest.ends_with(&format!("/{LOG_SEGMENT}"))
        && rest.matches('/').count() == if by_submission { 2 } else { 3 };
    match (by_submission, log, delete) {
        (true, true, _) => "submission_log",
        (true, false, true) => "submission_kill",
        (true, false, false) => "submission_status",
        (false, true, _) => "driver_log",
        (false, false, true) => "driver_kill",
        (false, false, false) => "driver_status",
    }
}

fn method_label(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        http::Method::PATCH => "PATCH",
        http::Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// Counts, times and gauges every request that reaches it (an axum middleware).
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let route = route_label(request.method(), request.uri().path());
    let method = method_label(request.method());
    let started = Instant::now();
    metrics.in_flight.inc();
    // Decrements on every exit, a panic unwinding through here included.
    struct Leave<'a>(&'a Gauge);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0.dec();
        }
    }
    let leave = Leave(&metrics.in_flight);
    let response = next.run(request).await;
    drop(leave);
    metrics
        .requests
        .get_or_create(&RequestLabels {
            route,
            method,
            code: response.status().as_u16(),
        })
        .inc();
    metrics
        .latency
        .get_or_create(&RouteLabels { route })
        .observe(started.elapsed().as_secs_f64());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_map_to_a_fixed_set() {
        use http::Method;
        let cases = [
            (Method::POST, "/api/v1/spark-submit", "submit"),
            (Method::GET, "/api/v1/spark-submit", "list"),
            (Method::GET, "/api/v1/spark-submit/abc", "submission_status"),
            (
                Method::DELETE,
                "/api/v1/spark-submit/abc",
                "submission_kill",
            ),
            (
                Method::GET,
                "/api/v1/spark-submit/abc/log",
                "submission_log",
            ),
            (Method::GET, "/api/v1/spark-submitx", "other"),
            (Method::GET, "/api/v1/drivers/ns/pod", "driver_status"),
            (Method::DELETE, "/api/v1/drivers/ns/pod", "driver_kill"),
            (Method::GET, "/api/v1/drivers/ns/pod/log", "driver_log"),
            (Method::GET, "/api/v1/drivers/ns/log", "driver_status"),
            (Method::GET, "/random/../path", "other"),
        ];
        for (method, path, route) in cases {
            assert_eq!(route_label(&method, path), route, "{method} {path}");
        }
    }

    #[test]
    fn exposition_names_every_metric() {
        let metrics = Metrics::new();
        metrics.duplicate();
        // Families print only once they have a series.
        let labels = RequestLabels {
            route: "submit",
            method: "POST",
            code: 201,
        };
        metrics.requests.get_or_create(&labels).inc();
        metrics
            .latency
            .get_or_create(&RouteLabels { route: "submit" })
            .observe(0.01);
        let text = metrics.encode();
        for name in [
            "submitter_http_requests_total{route=\"submit\",method=\"POST\",code=\"201\"} 1",
            "submitter_http_request_duration_seconds",
            "submitter_http_requests_in_flight",
            "submitter_duplicate_submissions_total 1",
            "submitter_rollbacks_total",
            "submitter_swept_config_maps_total",
            "submitter_sweep_passes_total",
            "submitter_log_streams_open",
            "submitter_log_bytes_streamed_total",
            "submitter_kills_total",
        ] {
            assert!(text.contains(name), "{name} missing from {text}");
        }
    }
}
