//! Fairness per client identity: each identity has its own budget, so one client that floods the
//! service is answered 503 `SUBMITTER_OVERLOADED` with `Retry-After` while the others keep being
//! served. The global concurrency limit still caps the whole service; the per-identity budget
//! keeps any one identity from filling it.
//!
//! A budget has two parts, either of which can be off:
//! - an **in-flight cap**: at most `max_in_flight` requests of the identity at once (a request
//!   holds its [`Permit`] until its answer is ready, or until it is dropped);
//! - a **token bucket**: `rate` requests a second on average with bursts of `burst`.
//!
//! Decided: a request is charged to the first identity of its client certificate (its first DNS
//! SAN, else URI SAN, else CN: the name logs show); requests without a certificate share the
//! budget of [`ANONYMOUS`] (the API answers them 401, but they still cost a little). Budgets are
//! checked before the global limit, so a refused request never takes a global slot. Idle
//! identities (nothing in flight, bucket full) are forgotten once more than
//! [`FORGET_ABOVE`] identities are known, so the table stays small.
//!
//! The budget arithmetic is pure: the clock is a parameter. A refusal is a [`Refusal`]; the
//! service's middleware answers it through the envelope, the one place failures become HTTP.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::tls::PeerIdentity;

/// The identity requests without a client certificate are charged to.
pub const ANONYMOUS: &str = "(anonymous)";

/// Above this many known identities, idle ones are forgotten.
pub const FORGET_ABOVE: usize = 1024;

/// The longest `Retry-After` a refusal asks for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// What a refusal for a full in-flight cap asks the client to wait: a slot frees when one of
/// the identity's requests is answered, usually well within a second.
pub const IN_FLIGHT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// What each identity may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetConfig {
    /// Requests of one identity served at once; 0: no cap.
    pub max_in_flight: usize,
    /// Requests a second one identity may make on average; 0: no rate limit.
    pub rate: f64,
    /// Requests one identity may make at once after being idle (the bucket's size); at least 1
    /// when `rate` is set.
    pub burst: u32,
}

impl BudgetConfig {
    /// No per-identity budget at all.
    pub const UNLIMITED: BudgetConfig = BudgetConfig {
        max_in_flight: 0,
        rate: 0.0,
        burst: 0,
    };

    fn limits_anything(&self) -> bool {
        self.max_in_flight > 0 || self.rate > 0.0
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refusal {
    /// The identity already has `max_in_flight` requests being served.
    InFlight { limit: usize },
    /// The identity's bucket is empty; a token comes back after `retry_after`.
    Rate { retry_after: Duration },
}

impl Refusal {
    /// A stable name for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::InFlight { .. } => "in_flight",
            Refusal::Rate { .. } => "rate",
        }
    }

    /// How long the client should wait before trying again.
    pub fn retry_after(&self) -> Duration {
        match self {
            Refusal::InFlight { .. } => IN_FLIGHT_RETRY_AFTER,
            Refusal::Rate { retry_after } => *retry_after,
        }
    }
}

/// One identity's use of its budget.
#[derive(Debug, Clone, PartialEq)]
struct Usage {
    in_flight: usize,
    tokens: f64,
    refilled_at: Instant,
}

impl Usage {
    fn new(config: &BudgetConfig, now: Instant) -> Usage {
        Usage {
            in_flight: 0,
            tokens: f64::from(config.burst.max(1)),
            refilled_at: now,
        }
    }

    fn refill(&mut self, config: &BudgetConfig, now: Instant) {
        if config.rate > 0.0 {
            let elapsed = now
                .saturating_duration_since(self.refilled_at)
                .as_secs_f64();
            self.tokens = (self.tokens + elapsed * config.rate).min(f64::from(config.burst.max(1)));
        }
        self.refilled_at = now;
    }

    /// Admits one request at `now`, or says why not; pure.
    fn admit(&mut self, config: &BudgetConfig, now: Instant) -> Result<(), Refusal> {
        self.refill(config, now);
        if config.max_in_flight > 0 && self.in_flight >= config.max_in_flight {
            return Err(Refusal::InFlight {
                limit: config.max_in_flight,
            });
        }
        if config.rate > 0.0 {
            if self.tokens < 1.0 {
                let wait = Duration::from_secs_f64((1.0 - self.tokens) / config.rate);
                return Err(Refusal::Rate {
                    retry_after: wait.min(MAX_RETRY_AFTER),
                });
            }
            self.tokens -= 1.0;
        }
        self.in_flight += 1;
        Ok(())
    }

    fn idle(&self, config: &BudgetConfig) -> bool {
        self.in_flight == 0 && self.tokens >= f64::from(config.burst.max(1))
    }
}

/// The budgets of every identity; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Budgets {
    config: BudgetConfig,
    usage: Arc<Mutex<HashMap<String, Usage>>>,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets::new(BudgetConfig::UNLIMITED)
    }
}

/// A request admitted under an identity's budget; dropping it ends the request's share.
#[derive(Debug)]
pub struct Permit {
    budgets: Budgets,
    identity: String,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut usage = self.budgets.lock();
        if let Some(entry) = usage.get_mut(&self.identity) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
        }
    }
}

impl Budgets {
    pub fn new(config: BudgetConfig) -> Budgets {
        Budgets {
            config,
            usage: Arc::default(),
        }
    }

    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Usage>> {
        // A poisoned lock only means a panic elsewhere while holding it; the counts are whole.
        self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Charges one request of `identity` at `now`: a permit to hold while it is served, or why
    /// it must wait. `None` when no budget is configured.
    pub fn try_admit(&self, identity: &str, now: Instant) -> Result<Option<Permit>, Refusal> {
        if !self.config.limits_anything() {
            return Ok(None);
        }
        let mut usage = self.lock();
        if usage.len() > FORGET_ABOVE {
            let config = self.config;
            usage.retain(|_, entry| {
                entry.refill(&config, now);
                !entry.idle(&config)
            });
        }
        usage
            .entry(identity.to_owned())
            .or_insert_with(|| Usage::new(&self.config, now))
            .admit(&self.config, now)?;
        Ok(Some(Permit {
            budgets: self.clone(),
            identity: identity.to_owned(),
        }))
    }

    /// Requests of `identity` being served now.
    pub fn in_flight(&self, identity: &str) -> usize {
        self.lock().get(identity).map_or(0, |entry| entry.in_flight)
    }

    /// How many identities are known.
    pub fn identities(&self) -> usize {
        self.lock().len()
    }
}

/// The identity a request is charged to.
pub fn charged_identity(peer: Option<&PeerIdentity>) -> &str {
    peer.and_then(|peer| peer.names().first())
        .map_or(ANONYMOUS, String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budgets(max_in_flight: usize, rate: f64, burst: u32) -> Budgets {
        Budgets::new(BudgetConfig {
            max_in_flight,
            rate,
            burst,
        })
    }

    fn kind(result: &Result<Option<Permit>, Refusal>) -> &'static str {
        match result {
            Ok(Some(_)) => "admitted",
            Ok(None) => "unlimited",
            Err(refusal) => refusal.kind(),
        }
    }

    #[test]
    fn in_flight_cap_is_per_identity_and_freed_by_dropping_the_permit() {
        let budgets = budgets(2, 0.0, 0);
        let now = Instant::now();
        let first = budgets.try_admit("flood", now);
        let second = budgets.try_admit("flood", now);
        assert_eq!(kind(&budgets.try_admit("flood", now)), "in_flight");
        assert_eq!(kind(&budgets.try_admit("steady", now)), "admitted");
        assert_eq!(budgets.in_flight("flood"), 2);
        drop(first);
        assert_eq!(budgets.in_flight("flood"), 1);
        let third = budgets.try_admit("flood", now);
        assert_eq!(kind(&third), "admitted");
        drop((second, third));
        assert_eq!(budgets.in_flight("flood"), 0);
    }

    #[test]
    fn bucket_allows_a_burst_then_the_rate_and_says_when_to_return() {
        let budgets = budgets(0, 2.0, 3);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(kind(&budgets.try_admit("a", start)), "admitted");
        }
        let refused = budgets.try_admit("a", start).unwrap_err();
        assert_eq!(refused.retry_after(), Duration::from_millis(500));
        // Half a second later one token is back, not two.
        let later = start + Duration::from_millis(500);
        assert_eq!(kind(&budgets.try_admit("a", later)), "admitted");
        assert_eq!(kind(&budgets.try_admit("a", later)), "rate");
        // Another identity has its own bucket.
        assert_eq!(kind(&budgets.try_admit("b", start)), "admitted");
        // Idle for long: the bucket is full again, never fuller.
        let much_later = start + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(kind(&budgets.try_admit("a", much_later)), "admitted");
        }
        assert_eq!(kind(&budgets.try_admit("a", much_later)), "rate");
    }

    #[test]
    fn a_refused_request_costs_nothing() {
        let budgets = budgets(1, 1.0, 1);
        let now = Instant::now();
        let held = budgets.try_admit("a", now).unwrap();
        // In flight: refused without spending the token that came back meanwhile.
        let later = now + Duration::from_secs(1);
        assert_eq!(kind(&budgets.try_admit("a", later)), "in_flight");
        drop(held);
        assert_eq!(kind(&budgets.try_admit("a", later)), "admitted");
    }

    #[test]
    fn no_budget_admits_everything_without_bookkeeping() {
        let budgets = Budgets::default();
        for _ in 0..100 {
            assert_eq!(kind(&budgets.try_admit("a", Instant::now())), "unlimited");
        }
        assert_eq!(budgets.identities(), 0);
    }

    #[test]
    fn idle_identities_are_forgotten_past_the_bound() {
        let budgets = budgets(1, 0.0, 0);
        let now = Instant::now();
        let held = budgets.try_admit("busy", now).unwrap();
        for index in 0..FORGET_ABOVE + 10 {
            drop(budgets.try_admit(&format!("client-{index}"), now));
        }
        assert!(budgets.identities() <= FORGET_ABOVE + 1);
        assert_eq!(
            budgets.in_flight("busy"),
            1,
            "a busy identity was forgotten"
        );
        drop(held);
    }

    #[test]
    fn requests_are_charged_to_the_first_identity_or_anonymous() {
        let peer = crate::tls::client_certificate::testing::identity(&["op.svc"], "operator");
        assert_eq!(charged_identity(Some(&peer)), "op.svc");
        assert_eq!(charged_identity(None), ANONYMOUS);
    }
}
