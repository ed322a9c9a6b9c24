//! The heartbeat loop: one epoch-guarded write per interval. A `FENCED` answer fences the agent and
//! ends the loop (a heartbeat is a write, and a fenced agent writes nothing more); backend errors
//! and timeouts are logged and retried at the next beat.

use std::time::Duration;
use submission::error_chain::ErrorChain;

use tokio::time::MissedTickBehavior;
use tracing::{debug, warn};

use super::state::HeartbeatOutcome;
use super::{Shared, now_ms};
use crate::progress_store::ProgressStore;

/// Beats every `interval` until the agent is fenced.
pub(super) async fn run<S: ProgressStore>(shared: &Shared<S>, store: &S, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if !shared.state().admit_heartbeat() {
            return;
        }
        let now = now_ms();
        let result = tokio::time::timeout(
            shared.store_timeout,
            store.heartbeat(&shared.app, shared.epoch, now),
        )
        .await;
        let outcome = {
            let mut state = shared.state();
            match &result {
                Ok(Ok(())) => {
                    state.heartbeat_landed(now);
                    None
                }
                Ok(Err(e)) => Some(state.heartbeat_failed(Some(e))),
                Err(_elapsed) => Some(state.heartbeat_failed(None)),
            }
        };
        match (outcome, result) {
            (None, _) => debug!(at_ms = now, "heartbeat"),
            (Some(HeartbeatOutcome::NewlyFenced { current }), _) => {
                warn!(
                    app = %shared.app,
                    epoch = shared.epoch,
                    current_epoch = current,
                    "fenced by a newer epoch: refusing every write from now on"
                );
                return;
            }
            (Some(HeartbeatOutcome::Retry), Ok(Err(e))) => {
                warn!(app = %shared.app, kind = e.kind(), error = %ErrorChain(&e), "heartbeat failed; retrying");
            }
            (Some(HeartbeatOutcome::Retry), _) => {
                warn!(app = %shared.app, timeout_ms = shared.store_timeout.as_millis() as u64, "heartbeat timed out; retrying");
            }
        }
    }
}
