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

use submission::api::{DRIVERS_PATH, SUBMIT_PATH};

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
        Metrics {
            registry,
            requests,
            latency,
            in_flight,
            duplicates,
            rollbacks,
            swept,
            sweep_passes,
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
pub fn route_label(path: &str) -> &'static str {
    if path == SUBMIT_PATH {
        "submit"
    } else if path
        .strip_prefix(SUBMIT_PATH)
        .is_some_and(|rest| rest.starts_with('/'))
    {
        "submission_status"
    } else if path
        .strip_prefix(DRIVERS_PATH)
        .is_some_and(|rest| rest.starts_with('/'))
    {
        "driver_status"
    } else {
        "other"
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
    let route = route_label(request.uri().path());
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
        assert_eq!(route_label("/api/v1/spark-submit"), "submit");
        assert_eq!(route_label("/api/v1/spark-submit/abc"), "submission_status");
        assert_eq!(route_label("/api/v1/spark-submitx"), "other");
        assert_eq!(route_label("/api/v1/drivers/ns/pod"), "driver_status");
        assert_eq!(route_label("/random/../path"), "other");
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
        ] {
            assert!(text.contains(name), "{name} missing from {text}");
        }
    }
}
