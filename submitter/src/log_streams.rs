//! The log streams the service has open: how many each client identity may hold, the signal
//! that ends them all at shutdown, and the body that carries one from the API server to the
//! client.
//!
//! A stream holds no log of its own: [`relay`] passes each chunk of the API server's answer on
//! as it comes, and asks for the next only when the client's connection has taken the last (the
//! HTTP server polls a body only when it can write), so a slow reader slows its own stream down
//! to the API server's socket and nothing piles up in between. What a stream holds is its
//! slot ([`Slot`]), counted per identity until the body is dropped: the client closed, the log
//! ended, or the service shut down.
//!
//! Shutdown: [`LogStreams::close_all`] ends every open stream cleanly (the chunked answer is
//! terminated, so the client sees the log end rather than a broken connection) and refuses new
//! ones; graceful shutdown then has no follower to wait for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::watch;

use crate::metrics::Metrics;

/// Default of the log streams one identity may have open at once.
pub const DEFAULT_MAX_PER_IDENTITY: usize = 64;

/// `Retry-After` of a refused stream: open streams end when their client is done, which no
/// clock predicts; a few seconds keeps a waiting client from spinning.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Why a stream was not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("identity {identity:?} has {limit} log streams open, its limit")]
    Full { identity: String, limit: usize },
    #[error("the service is shutting down")]
    Closing,
}

impl Refusal {
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::Full { .. } => "full",
            Refusal::Closing => "closing",
        }
    }
}

/// The open streams, per identity; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct LogStreams {
    limit: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
    closing: watch::Sender<bool>,
}

impl Default for LogStreams {
    fn default() -> LogStreams {
        LogStreams::new(DEFAULT_MAX_PER_IDENTITY)
    }
}

impl LogStreams {
    /// At most `limit` open streams per identity (at least 1).
    pub fn new(limit: usize) -> LogStreams {
        LogStreams {
            limit: limit.max(1),
            open: Arc::default(),
            closing: watch::channel(false).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        // A poisoned lock only means a panic elsewhere while holding it; the counts are whole.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for one more stream of `identity`, or why not.
    pub fn admit(&self, identity: &str, metrics: &Arc<Metrics>) -> Result<Slot, Refusal> {
        if *self.closing.borrow() {
            return Err(Refusal::Closing);
        }
        let mut open = self.lock();
        let count = open.entry(identity.to_owned()).or_default();
        if *count >= self.limit {
            return Err(Refusal::Full {
                identity: identity.to_owned(),
                limit: self.limit,
            });
        }
        *count += 1;
        metrics.log_stream_opened();
        Ok(Slot {
            streams: self.clone(),
            identity: identity.to_owned(),
            metrics: metrics.clone(),
        })
    }

    /// Streams of `identity` open now.
    pub fn open(&self, identity: &str) -> usize {
        self.lock().get(identity).copied().unwrap_or(0)
    }

    /// Ends every open stream cleanly and refuses new ones (shutdown).
    pub fn close_all(&self) {
        self.closing.send_replace(true);
    }

    /// Waits for `signal` (the service's shutdown), then ends every stream: the shutdown future
    /// to hand the accept loop, so that draining never waits for a follower.
    pub async fn close_on(self, signal: impl Future<Output = ()>) {
        signal.await;
        self.close_all();
    }

    /// Resolves once [`LogStreams::close_all`] was called.
    async fn closed(&self) {
        let mut closing = self.closing.subscribe();
        // The sender lives in `self`, so the channel outlives the wait.
        let _ = closing.wait_for(|closing| *closing).await;
    }
}

/// One open stream's share of its identity's limit; dropping it gives the share back.
#[derive(Debug)]
pub struct Slot {
    streams: LogStreams,
    identity: String,
    metrics: Arc<Metrics>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.streams.lock();
        if let Some(count) = open.get_mut(&self.identity) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.identity);
            }
        }
        self.metrics.log_stream_closed();
    }
}

/// Whether a followed log that the API server ended cleanly really ended: answers `true` once
/// its container has exited (or its pod is gone). See [`relay`].
pub type EndCheck = Box<dyn FnOnce() -> futures::future::BoxFuture<'static, bool> + Send>;

/// What [`relay`] keeps between chunks.
struct Relay<S> {
    upstream: S,
    slot: Slot,
    end_check: Option<EndCheck>,
    /// The upstream failed; its error was passed on, nothing follows it.
    broken: bool,
}

/// The client's body for the API server's `upstream`: its chunks passed on one at a time (each
/// counted in the metrics), ending when it ends or at shutdown; a broken upstream breaks the
/// client's answer too (an error, not a clean end, so a truncated log never looks whole). So
/// does a clean end that `end_check` finds premature: the API server ends a followed log
/// cleanly when it loses the kubelet (its proxy's copy just stops), which a follower could not
/// tell from the container's exit.
pub fn relay<S, E>(
    upstream: S,
    slot: Slot,
    end_check: Option<EndCheck>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin + Send,
    E: std::error::Error + Send + Sync + 'static,
{
    let relay = Relay {
        upstream,
        slot,
        end_check,
        broken: false,
    };
    futures::stream::unfold(relay, |mut relay| async move {
        if relay.broken {
            return None;
        }
        let closed = relay.slot.streams.clone();
        let next = tokio::select! {
            // Shutdown first: a stream that always has data must still end.
            biased;
            () = closed.closed() => return None,
            next = relay.upstream.next() => next,
        };
        let Some(next) = next else {
            let check = relay.end_check.take()?;
            if check().await {
                return None;
            }
            tracing::warn!("the API server ended a followed log while its container still runs");
            relay.broken = true;
            let cut = std::io::Error::other("the log ended while its container still runs");
            return Some((Err(cut), relay));
        };
        match next {
            Ok(chunk) => {
                relay.slot.metrics.log_bytes(chunk.len());
                Some((Ok(chunk), relay))
            }
            Err(error) => {
                tracing::warn!(error = %error, "the API server's log stream broke off");
                relay.broken = true;
                Some((Err(std::io::Error::other(error)), relay))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new())
    }

    #[test]
    fn each_identity_has_its_own_limit_and_a_dropped_slot_frees_its_share() {
        let streams = LogStreams::new(2);
        let metrics = metrics();
        let first = streams.admit("airflow", &metrics).unwrap();
        let _second = streams.admit("airflow", &metrics).unwrap();
        assert_eq!(
            streams.admit("airflow", &metrics).unwrap_err().kind(),
            "full"
        );
        assert!(streams.admit("ci", &metrics).is_ok());
        drop(first);
        assert_eq!(streams.open("airflow"), 1);
        assert!(streams.admit("airflow", &metrics).is_ok());
    }

    #[tokio::test]
    async fn a_stream_that_never_ends_ends_at_shutdown_and_no_new_one_opens() {
        let streams = LogStreams::new(4);
        let metrics = metrics();
        let upstream = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from("line 1\n"))])
            .chain(futures::stream::pending());
        let mut body = Box::pin(relay(upstream, streams.admit("a", &metrics).unwrap(), None));
        assert_eq!(body.next().await.unwrap().unwrap(), "line 1\n");
        streams.close_all();
        assert!(body.next().await.is_none(), "the stream ends cleanly");
        drop(body);
        assert_eq!(streams.open("a"), 0);
        assert_eq!(streams.admit("a", &metrics).unwrap_err(), Refusal::Closing);
        assert!(
            metrics
                .encode()
                .contains("submitter_log_bytes_streamed_total 7")
        );
    }

    #[tokio::test]
    async fn a_followed_log_ended_before_its_container_breaks_the_answer() {
        let streams = LogStreams::new(2);
        let metrics = metrics();
        for (exited, whole) in [(true, true), (false, false)] {
            let upstream = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from("a\n"))]);
            let check: EndCheck = Box::new(move || Box::pin(async move { exited }));
            let chunks: Vec<_> =
                relay(upstream, streams.admit("a", &metrics).unwrap(), Some(check))
                    .collect()
                    .await;
            assert_eq!(chunks[0].as_ref().unwrap(), "a\n");
            assert_eq!(chunks.len(), if whole { 1 } else { 2 }, "exited: {exited}");
            assert!(whole || chunks[1].is_err());
        }
    }

    #[tokio::test]
    async fn a_broken_upstream_breaks_the_answer() {
        let streams = LogStreams::new(1);
        let metrics = metrics();
        let upstream =
            futures::stream::iter([Ok(Bytes::from("a\n")), Err(std::io::Error::other("reset"))]);
        let chunks: Vec<_> = relay(upstream, streams.admit("a", &metrics).unwrap(), None)
            .collect()
            .await;
        assert!(chunks[0].is_ok());
        assert!(chunks[1].is_err());
    }
}
