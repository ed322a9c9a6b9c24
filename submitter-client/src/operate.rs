//! Operating a submission by its id or `namespace:pod`: its driver's log as a stream, its kill,
//! and the list of what the client may see. Each is retried like a submission: a kill is
//! idempotent, a list and the opening of a log read only. A log that breaks off once open is not
//! reopened here: the stream ends with the error, and the caller decides (reopen with
//! `since_seconds` or `tail_lines`).

use std::pin::Pin;

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use tracing::info;

use crate::{SubmitError, SubmitterClient, answer, read_whole};
use submission::api::{
    DriverStatus, KillQuery, LOG_SEGMENT, ListQuery, ListResponse, LogQuery, SUBMIT_PATH, Target,
    path_segment,
};

/// A driver's log as the service passes it on: chunks of its text, in order.
pub type LogStream = Pin<Box<dyn Stream<Item = Result<Bytes, SubmitError>> + Send>>;

impl SubmitterClient {
    /// The log of `target`'s driver with `query`'s options: a stream that ends when the log
    /// does (with `follow`, when the driver container exits). The head of the answer is awaited
    /// under the request timeout and retried like a submission (503, 429
    /// `TOO_MANY_LOG_STREAMS`, lost connections); the body has no timeout.
    pub async fn logs(&self, target: &Target, query: &LogQuery) -> Result<LogStream, SubmitError> {
        let uri = self.url(&format!("{}/{LOG_SEGMENT}", target.path()), &query.pairs());
        self.with_retries("logs", || self.open_log(&uri)).await
    }

    /// Kills `target`'s driver as `spark-submit --kill` does; its status after the kill.
    pub async fn kill(
        &self,
        target: &Target,
        query: &KillQuery,
    ) -> Result<DriverStatus, SubmitError> {
        let uri = self.url(&target.path(), &query.pairs());
        let status: DriverStatus = self
            .with_retries("kill", || {
                self.call(Method::DELETE, &uri, None, &[StatusCode::ACCEPTED])
            })
            .await?;
        info!(%target, phase = ?status.phase, "kill answered");
        Ok(status)
    }

    /// One page of the submissions the client may see.
    pub async fn list(&self, query: &ListQuery) -> Result<ListResponse, SubmitError> {
        let uri = self.url(SUBMIT_PATH, &query.pairs());
        self.with_retries("list", || {
            self.call(Method::GET, &uri, None, &[StatusCode::OK])
        })
        .await
    }

    /// `path` under the client's base, with `pairs` as its query.
    fn url(&self, path: &str, pairs: &[(&'static str, String)]) -> String {
        let query: Vec<String> = pairs
            .iter()
            .map(|(key, value)| format!("{key}={}", path_segment(value)))
            .collect();
        if query.is_empty() {
            format!("{}{path}", self.base)
        } else {
            format!("{}{path}?{}", self.base, query.join("&"))
        }
    }

    /// One attempt at opening a log.
    async fn open_log(&self, uri: &str) -> Result<LogStream, SubmitError> {
        let timed_out = |_| SubmitError::TimedOut {
            after: self.request_timeout,
        };
        let response = tokio::time::timeout(
            self.request_timeout,
            self.send(Method::GET, uri, None, "text/plain"),
        )
        .await
        .map_err(timed_out)??;
        if response.status() == StatusCode::OK {
            let body = response.into_body().into_data_stream();
            return Ok(Box::pin(body.map_err(|source| SubmitError::ReadResponse {
                status: StatusCode::OK.as_u16(),
                source: Box::new(source),
            })));
        }
        let (status, headers, body) =
            tokio::time::timeout(self.request_timeout, read_whole(response))
                .await
                .map_err(timed_out)??;
        Err(answer::refusal(status, &headers, &body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientConfig;

    #[test]
    fn urls_carry_the_target_and_the_set_options_encoded() {
        let client =
            SubmitterClient::new(ClientConfig::new("http://127.0.0.1:8080/proxy")).unwrap();
        let target = Target::Submission("run 1".into());
        let query = LogQuery {
            follow: Some(true),
            container: Some("a b".into()),
            ..LogQuery::default()
        };
        assert_eq!(
            client.url(&format!("{}/{LOG_SEGMENT}", target.path()), &query.pairs()),
            "http://127.0.0.1:8080/proxy/api/v1/spark-submit/run%201/log?follow=true&container=a%20b"
        );
        assert_eq!(
            client.url(SUBMIT_PATH, &ListQuery::default().pairs()),
            "http://127.0.0.1:8080/proxy/api/v1/spark-submit"
        );
    }
}
