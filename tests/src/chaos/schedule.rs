//! The fault schedule: generated up front from the seed, so one seed always replays the same
//! list of `(offset, fault)`.

use std::fmt;
use std::time::Duration;

/// One injected fault. Faults that last (a partition, latency, a replica down) carry how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Kill operator replica `replica` (its whole runtime at once, as a kill -9 would stop its
    /// threads); a supervisor brings it back after `down`.
    KillOperator { replica: usize, down: Duration },
    /// Kill submitter instance `instance`; back after `down`.
    KillSubmitter { instance: usize, down: Duration },
    /// Kill the driver container of a running driver pod (`pick` chooses among them, sorted by
    /// name) with `exit_code`.
    KillDriver { pick: usize, exit_code: i32 },
    /// Kill the recovery agent sidecar of a running driver pod (`pick` among those with one);
    /// the kubelet restarts it, as it restarts a sidecar.
    KillAgent { pick: usize },
    /// Close every open watch; clients resume from their resourceVersion.
    DropWatches,
    /// Forget the store's history: every watch and continue token gets 410 Gone.
    Compact,
    /// The next `count` requests on `resource` (any when `None`) fail with `code` (500 or 429).
    ApiErrors {
        resource: Option<&'static str>,
        code: u16,
        count: u64,
    },
    /// Every request waits `millis` more, for `lasting`.
    ApiLatency { millis: u64, lasting: Duration },
    /// Node `node` (index into the cluster's nodes) loses the API server, healed after `lasting`.
    Partition { node: usize, lasting: Duration },
    /// Restart the Redis store (empty, as a crash without persistence).
    RestartRedis,
    /// Reissue the submitter's server and client certificates (rename over, as cert-manager).
    RotateCertificates,
}

impl Fault {
    /// A stable label for counts in the report.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::KillOperator { .. } => "kill_operator",
            Fault::KillSubmitter { .. } => "kill_submitter",
            Fault::KillDriver { .. } => "kill_driver",
            Fault::KillAgent { .. } => "kill_agent",
            Fault::DropWatches => "drop_watches",
            Fault::Compact => "compact_410",
            Fault::ApiErrors { code: 429, .. } => "api_429",
            Fault::ApiErrors { .. } => "api_500",
            Fault::ApiLatency { .. } => "api_latency",
            Fault::Partition { .. } => "partition",
            Fault::RestartRedis => "restart_redis",
            Fault::RotateCertificates => "rotate_certificates",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::KillOperator { replica, down } => {
                write!(f, "kill operator replica {replica}, down {down:?}")
            }
            Fault::KillSubmitter { instance, down } => {
                write!(f, "kill submitter instance {instance}, down {down:?}")
            }
            Fault::KillDriver { pick, exit_code } => {
                write!(f, "kill running driver #{pick} with exit code {exit_code}")
            }
            Fault::KillAgent { pick } => write!(f, "kill the agent of running driver #{pick}"),
            Fault::DropWatches => write!(f, "drop every watch"),
            Fault::Compact => write!(f, "compact the store (410 Gone)"),
            Fault::ApiErrors {
                resource,
                code,
                count,
            } => write!(
                f,
                "fail the next {count} requests on {} with {code}",
                resource.unwrap_or("any resource")
            ),
            Fault::ApiLatency { millis, lasting } => {
                write!(f, "add {millis} ms to every request for {lasting:?}")
            }
            Fault::Partition { node, lasting } => {
                write!(f, "partition node #{node} for {lasting:?}")
            }
            Fault::RestartRedis => write!(f, "restart redis"),
            Fault::RotateCertificates => write!(f, "rotate the submitter's certificates"),
        }
    }
}

/// What the schedule may draw from.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub operators: usize,
    pub submitters: usize,
    pub nodes: usize,
    pub redis: bool,
    /// Mean pause between two faults.
    pub mean_gap: Duration,
}

/// Faults from `seed` over `duration`: pauses drawn around `shape.mean_gap`, each fault drawn by
/// weight. The generator is the only randomness in it, so the same inputs give the same list.
pub fn generate(seed: u64, duration: Duration, shape: Shape) -> Vec<(Duration, Fault)> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut at = Duration::ZERO;
    let mut faults = Vec::new();
    let gap = shape.mean_gap.as_millis().max(2) as u64;
    loop {
        at += Duration::from_millis(rng.u64(gap / 2..gap * 3 / 2));
        if at >= duration {
            return faults;
        }
        faults.push((at, draw(&mut rng, shape)));
    }
}

fn draw(rng: &mut fastrand::Rng, shape: Shape) -> Fault {
    let seconds = |rng: &mut fastrand::Rng, low: u64, high: u64| {
        Duration::from_millis(rng.u64(low * 1000..high * 1000))
    };
    loop {
        let fault = match rng.u32(0..100) {
            0..12 => Fault::KillOperator {
                replica: rng.usize(0..shape.operators.max(1)),
                down: seconds(rng, 1, 6),
            },
            12..24 => Fault::KillSubmitter {
                instance: rng.usize(0..shape.submitters.max(1)),
                down: seconds(rng, 1, 6),
            },
            24..30 => Fault::KillDriver {
                pick: rng.usize(0..64),
                exit_code: if rng.bool() { 137 } else { 1 },
            },
            30..34 => Fault::KillAgent {
                pick: rng.usize(0..64),
            },
            34..44 => Fault::DropWatches,
            44..52 => Fault::Compact,
            52..66 => Fault::ApiErrors {
                resource: [
                    None,
                    Some("pods"),
                    Some("sparkapplications"),
                    Some("configmaps"),
                    Some("leases"),
                ][rng.usize(0..5)],
                code: if rng.bool() { 500 } else { 429 },
                count: rng.u64(1..6),
            },
            66..74 => Fault::ApiLatency {
                millis: rng.u64(50..400),
                lasting: seconds(rng, 1, 5),
            },
            74..84 => Fault::Partition {
                node: rng.usize(0..shape.nodes.max(1)),
                lasting: seconds(rng, 2, 10),
            },
            84..92 => Fault::RestartRedis,
            _ => Fault::RotateCertificates,
        };
        if shape.redis || fault != Fault::RestartRedis {
            return fault;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape {
            operators: 2,
            submitters: 3,
            nodes: 3,
            redis: true,
            mean_gap: Duration::from_secs(2),
        }
    }

    #[test]
    fn the_same_seed_replays_the_same_schedule() {
        let a = generate(7, Duration::from_secs(120), shape());
        let b = generate(7, Duration::from_secs(120), shape());
        assert_eq!(a, b);
        assert!(a.len() > 20, "{a:?}");
        assert_ne!(a, generate(8, Duration::from_secs(120), shape()));
    }

    #[test]
    fn a_schedule_stays_within_its_duration_and_its_shape() {
        let no_redis = Shape {
            redis: false,
            ..shape()
        };
        let faults = generate(3, Duration::from_secs(300), no_redis);
        assert!(faults.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(faults.iter().all(|(at, _)| *at < Duration::from_secs(300)));
        assert!(faults.iter().all(|(_, f)| *f != Fault::RestartRedis));
        assert!(faults.iter().all(|(_, f)| match f {
            Fault::KillOperator { replica, .. } => *replica < 2,
            Fault::KillSubmitter { instance, .. } => *instance < 3,
            Fault::Partition { node, .. } => *node < 3,
            _ => true,
        }));
    }
}
