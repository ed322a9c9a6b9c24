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
    /// A ResourceQuota on `resource` in job namespace `namespace` (index) set at what is used
    /// now, so every new pod there is refused, then lifted after `lasting`.
    QuotaFlip {
        namespace: usize,
        resource: QuotaResource,
        lasting: Duration,
    },
    /// A user kills a running driver (`pick` among them, sorted by namespace and name) through
    /// the submitter's `DELETE` by its submission id.
    KillApi { pick: usize },
    /// A user follows a running driver's log (`pick` among them) through the submitter, by
    /// submission id or by `namespace/pod`, and hangs up after `after_lines` lines.
    CutLogStream {
        pick: usize,
        after_lines: usize,
        by_id: bool,
    },
}

/// What a flipped quota constrains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaResource {
    /// `pods`: the count of pods not finished.
    Pods,
    /// `requests.cpu`: also refuses every pod with a container that requests no cpu.
    RequestsCpu,
}

impl QuotaResource {
    /// The quota's key for it.
    pub fn key(self) -> &'static str {
        match self {
            QuotaResource::Pods => "pods",
            QuotaResource::RequestsCpu => "requests.cpu",
        }
    }
}

/// The kinds of fault, for counts, weights and the check that a run saw each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    KillOperator,
    KillSubmitter,
    KillDriver,
    KillAgent,
    DropWatches,
    Compact,
    Api500,
    Api429,
    ApiLatency,
    Partition,
    RestartRedis,
    RotateCertificates,
    QuotaFlip,
    KillApi,
    CutLogStream,
}

impl FaultKind {
    /// Every kind, in the report's order.
    pub const ALL: [FaultKind; 15] = [
        FaultKind::KillOperator,
        FaultKind::KillSubmitter,
        FaultKind::KillDriver,
        FaultKind::KillAgent,
        FaultKind::DropWatches,
        FaultKind::Compact,
        FaultKind::Api500,
        FaultKind::Api429,
        FaultKind::ApiLatency,
        FaultKind::Partition,
        FaultKind::RestartRedis,
        FaultKind::RotateCertificates,
        FaultKind::QuotaFlip,
        FaultKind::KillApi,
        FaultKind::CutLogStream,
    ];

    /// A stable label for counts in the report.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillOperator => "kill_operator",
            FaultKind::KillSubmitter => "kill_submitter",
            FaultKind::KillDriver => "kill_driver",
            FaultKind::KillAgent => "kill_agent",
            FaultKind::DropWatches => "drop_watches",
            FaultKind::Compact => "compact_410",
            FaultKind::Api500 => "api_500",
            FaultKind::Api429 => "api_429",
            FaultKind::ApiLatency => "api_latency",
            FaultKind::Partition => "partition",
            FaultKind::RestartRedis => "restart_redis",
            FaultKind::RotateCertificates => "rotate_certificates",
            FaultKind::QuotaFlip => "quota_flip",
            FaultKind::KillApi => "kill_api",
            FaultKind::CutLogStream => "cut_log_stream",
        }
    }

    /// How many of each kind one round of the schedule holds: how often it comes relative to
    /// the others.
    fn weight(self) -> usize {
        match self {
            FaultKind::KillOperator | FaultKind::KillSubmitter => 3,
            FaultKind::KillAgent | FaultKind::RotateCertificates | FaultKind::QuotaFlip => 1,
            _ => 2,
        }
    }

    /// Whether a stack of `shape` can have this fault.
    pub fn possible(self, shape: &Shape) -> bool {
        self != FaultKind::RestartRedis || shape.redis
    }

    /// The kinds a stack of `shape` can have.
    pub fn all_for(shape: &Shape) -> Vec<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(|k| k.possible(shape))
            .collect()
    }
}

impl Fault {
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::KillOperator { .. } => FaultKind::KillOperator,
            Fault::KillSubmitter { .. } => FaultKind::KillSubmitter,
            Fault::KillDriver { .. } => FaultKind::KillDriver,
            Fault::KillAgent { .. } => FaultKind::KillAgent,
            Fault::DropWatches => FaultKind::DropWatches,
            Fault::Compact => FaultKind::Compact,
            Fault::ApiErrors { code: 429, .. } => FaultKind::Api429,
            Fault::ApiErrors { .. } => FaultKind::Api500,
            Fault::ApiLatency { .. } => FaultKind::ApiLatency,
            Fault::Partition { .. } => FaultKind::Partition,
            Fault::RestartRedis => FaultKind::RestartRedis,
            Fault::RotateCertificates => FaultKind::RotateCertificates,
            Fault::QuotaFlip { .. } => FaultKind::QuotaFlip,
            Fault::KillApi { .. } => FaultKind::KillApi,
            Fault::CutLogStream { .. } => FaultKind::CutLogStream,
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
            Fault::QuotaFlip {
                namespace,
                resource,
                lasting,
            } => write!(
                f,
                "quota on {} at its use in job namespace #{namespace} for {lasting:?}",
                resource.key()
            ),
            Fault::KillApi { pick } => {
                write!(
                    f,
                    "kill running driver #{pick} through the submitter's DELETE"
                )
            }
            Fault::CutLogStream {
                pick,
                after_lines,
                by_id,
            } => write!(
                f,
                "follow the log of running driver #{pick} by {}, hang up after {after_lines} lines",
                if *by_id {
                    "submission id"
                } else {
                    "namespace/pod"
                }
            ),
        }
    }
}

/// What the schedule may draw from.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub operators: usize,
    pub submitters: usize,
    pub nodes: usize,
    /// Job namespaces a quota may be flipped in.
    pub namespaces: usize,
    pub redis: bool,
    /// Mean pause between two faults.
    pub mean_gap: Duration,
}

/// Faults from `seed` over `duration`: pauses drawn around `shape.mean_gap`, kinds drawn by
/// weight without replacement from rounds that hold every possible kind (so any window of one
/// round's length, about 27 faults, sees each), parameters drawn per fault. The generator is
/// the only randomness in it, so the same inputs give the same list.
pub fn generate(seed: u64, duration: Duration, shape: Shape) -> Vec<(Duration, Fault)> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut at = Duration::ZERO;
    let mut faults = Vec::new();
    let mut round: Vec<FaultKind> = Vec::new();
    let gap = shape.mean_gap.as_millis().max(2) as u64;
    loop {
        at += Duration::from_millis(rng.u64(gap / 2..gap * 3 / 2));
        if at >= duration {
            return faults;
        }
        if round.is_empty() {
            round = FaultKind::all_for(&shape)
                .into_iter()
                .flat_map(|kind| std::iter::repeat_n(kind, kind.weight()))
                .collect();
            rng.shuffle(&mut round);
        }
        let Some(kind) = round.pop() else {
            return faults;
        };
        faults.push((at, draw(&mut rng, kind, shape)));
    }
}

/// A fault of `kind` with its parameters drawn from `rng`.
fn draw(rng: &mut fastrand::Rng, kind: FaultKind, shape: Shape) -> Fault {
    let seconds = |rng: &mut fastrand::Rng, low: u64, high: u64| {
        Duration::from_millis(rng.u64(low * 1000..high * 1000))
    };
    let resource = |rng: &mut fastrand::Rng| {
        [
            None,
            Some("pods"),
            Some("sparkapplications"),
            Some("configmaps"),
            Some("leases"),
        ][rng.usize(0..5)]
    };
    match kind {
        FaultKind::KillOperator => Fault::KillOperator {
            replica: rng.usize(0..shape.operators.max(1)),
            down: seconds(rng, 1, 6),
        },
        FaultKind::KillSubmitter => Fault::KillSubmitter {
            instance: rng.usize(0..shape.submitters.max(1)),
            down: seconds(rng, 1, 6),
        },
        FaultKind::KillDriver => Fault::KillDriver {
            pick: rng.usize(0..64),
            exit_code: if rng.bool() { 137 } else { 1 },
        },
        FaultKind::KillAgent => Fault::KillAgent {
            pick: rng.usize(0..64),
        },
        FaultKind::DropWatches => Fault::DropWatches,
        FaultKind::Compact => Fault::Compact,
        FaultKind::Api500 => Fault::ApiErrors {
            resource: resource(rng),
            code: 500,
            count: rng.u64(1..6),
        },
        FaultKind::Api429 => Fault::ApiErrors {
            resource: resource(rng),
            code: 429,
            count: rng.u64(1..6),
        },
        FaultKind::ApiLatency => Fault::ApiLatency {
            millis: rng.u64(50..400),
            lasting: seconds(rng, 1, 5),
        },
        FaultKind::Partition => Fault::Partition {
            node: rng.usize(0..shape.nodes.max(1)),
            lasting: seconds(rng, 2, 10),
        },
        FaultKind::RestartRedis => Fault::RestartRedis,
        FaultKind::RotateCertificates => Fault::RotateCertificates,
        FaultKind::QuotaFlip => Fault::QuotaFlip {
            namespace: rng.usize(0..shape.namespaces.max(1)),
            resource: if rng.bool() {
                QuotaResource::Pods
            } else {
                QuotaResource::RequestsCpu
            },
            lasting: seconds(rng, 2, 8),
        },
        FaultKind::KillApi => Fault::KillApi {
            pick: rng.usize(0..64),
        },
        FaultKind::CutLogStream => Fault::CutLogStream {
            pick: rng.usize(0..64),
            after_lines: rng.usize(1..4),
            by_id: rng.bool(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn shape() -> Shape {
        Shape {
            operators: 2,
            submitters: 3,
            nodes: 3,
            namespaces: 2,
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
            Fault::QuotaFlip { namespace, .. } => *namespace < 2,
            _ => true,
        }));
    }

    #[test]
    fn every_possible_kind_comes_within_one_round_whatever_the_seed() {
        for redis in [false, true] {
            let shape = Shape { redis, ..shape() };
            let round: usize = FaultKind::all_for(&shape).iter().map(|k| k.weight()).sum();
            for seed in 0..200 {
                let faults = generate(seed, Duration::from_secs(3600), shape);
                let kinds: BTreeSet<FaultKind> =
                    faults.iter().take(round).map(|(_, f)| f.kind()).collect();
                assert_eq!(
                    kinds,
                    FaultKind::all_for(&shape).into_iter().collect(),
                    "seed {seed}, redis {redis}"
                );
            }
        }
    }

    #[test]
    fn kinds_come_as_often_as_their_weights_say() {
        let faults = generate(11, Duration::from_secs(10_000), shape());
        let count = |kind: FaultKind| faults.iter().filter(|(_, f)| f.kind() == kind).count();
        // Whole rounds (minus the last, partial one) hold each kind weight times.
        assert!(count(FaultKind::KillOperator) >= 3 * count(FaultKind::QuotaFlip) - 3);
        assert!(count(FaultKind::KillOperator) <= 3 * count(FaultKind::QuotaFlip) + 3);
    }
}
