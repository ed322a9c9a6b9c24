//! Watches over WebSocket, as the API server serves them to clients that ask with an `Upgrade:
//! websocket` request (fabric8, i.e. Spark's driver and `spark-submit`, always does): the same
//! events as a streamed watch, one JSON event per text message.
//!
//! Only what a watch needs of RFC 6455: the handshake, unmasked text frames from the server,
//! and from the client (masked frames) pings answered with pongs and a close answered with a
//! close. A client's data messages mean nothing to a watch and are read and dropped.

use axum::body::{Body, Bytes};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The GUID RFC 6455 appends to the client's key.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The largest client frame read (control frames carry at most 125 bytes; a watch client sends
/// nothing else worth reading).
const MAX_CLIENT_FRAME: u64 = 64 * 1024;

/// The connection's upgrade handle, taken from the request when there is one.
pub struct Upgrade(Option<OnUpgrade>);

impl<S: Send + Sync> FromRequestParts<S> for Upgrade {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Upgrade(parts.extensions.remove::<OnUpgrade>()))
    }
}

/// A WebSocket handshake the request asks for: its `Sec-WebSocket-Accept` answer.
pub fn handshake(headers: &HeaderMap) -> Option<String> {
    let has = |name: header::HeaderName, word: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .map(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(word)))
                .unwrap_or(false)
        })
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return None;
    }
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)?
        .to_str()
        .ok()?
        .trim();
    Some(accept_key(key))
}

/// `base64(sha1(key + GUID))`.
fn accept_key(key: &str) -> String {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(key.as_bytes());
    sha.update(GUID.as_bytes());
    crate::base64::encode(&sha.digest().bytes())
}

/// Answers the handshake with 101 and, once the connection is upgraded, sends every event
/// `events` yields as a text message; a close from either side ends it.
pub fn serve(upgrade: Upgrade, accept: String, events: mpsc::Receiver<Bytes>) -> Response {
    let Upgrade(Some(on_upgrade)) = upgrade else {
        // The server cannot hand the connection over (HTTP/2, a test without a socket).
        return (
            StatusCode::BAD_REQUEST,
            "this connection cannot be upgraded to a WebSocket",
        )
            .into_response();
    };
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => pump(TokioIo::new(upgraded), events).await,
            Err(e) => tracing::debug!(error = %e, "websocket upgrade failed"),
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// What the reading half tells the writing half.
enum FromClient {
    Ping(Vec<u8>),
    Close,
}

async fn pump<T: AsyncRead + AsyncWrite + Send + 'static>(
    io: T,
    mut events: mpsc::Receiver<Bytes>,
) {
    let (mut rd, mut wr) = tokio::io::split(io);
    let (tx, mut from_client) = mpsc::channel::<FromClient>(8);
    let reader = tokio::spawn(async move {
        loop {
            let msg = match read_frame(&mut rd).await {
                Ok(Some((0x9, payload))) => FromClient::Ping(payload),
                Ok(Some((0x8, _))) | Ok(None) | Err(_) => FromClient::Close,
                Ok(Some(_)) => continue,
            };
            let closing = matches!(msg, FromClient::Close);
            if tx.send(msg).await.is_err() || closing {
                return;
            }
        }
    });
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(bytes) => {
                    if wr.write_all(&frame(0x1, &bytes)).await.is_err() {
                        break;
                    }
                }
                None => {
                    // The watch ended (timeout, dropped watches): close normally (1000).
                    let _ = wr.write_all(&frame(0x8, &1000u16.to_be_bytes())).await;
                    break;
                }
            },
            msg = from_client.recv() => match msg {
                Some(FromClient::Ping(payload)) => {
                    if wr.write_all(&frame(0xA, &payload)).await.is_err() {
                        break;
                    }
                }
                Some(FromClient::Close) | None => {
                    let _ = wr.write_all(&frame(0x8, &1000u16.to_be_bytes())).await;
                    break;
                }
            },
        }
    }
    let _ = wr.shutdown().await;
    reader.abort();
}

/// A final, unmasked server frame.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// Reads one client frame: `(opcode, unmasked payload)`, `None` at the end of the stream.
async fn read_frame<R: AsyncRead + Unpin>(rd: &mut R) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 2];
    match rd.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let opcode = head[0] & 0x0F;
    let masked = head[1] & 0x80 != 0;
    let len = match head[1] & 0x7F {
        126 => u64::from(rd.read_u16().await?),
        127 => rd.read_u64().await?,
        n => u64::from(n),
    };
    if len > MAX_CLIENT_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "client frame too large for a watch",
        ));
    }
    let mut mask = [0u8; 4];
    if masked {
        rd.read_exact(&mut mask).await?;
    }
    let mut payload = vec![0u8; usize::try_from(len).unwrap_or(0)];
    rd.read_exact(&mut payload).await?;
    if masked {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
    }
    Ok(Some((opcode, payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_key_is_rfc_6455s() {
        // The example of RFC 6455, section 1.3.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn only_upgrade_requests_are_handshakes() {
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_KEY,
            "dGhlIHNhbXBsZSBub25jZQ==".parse().expect("key"),
        );
        assert_eq!(handshake(&h), None);
        h.insert(header::UPGRADE, "WebSocket".parse().expect("upgrade"));
        h.insert(
            header::CONNECTION,
            "keep-alive, Upgrade".parse().expect("conn"),
        );
        assert_eq!(
            handshake(&h).as_deref(),
            Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        );
    }

    #[test]
    fn frames_use_the_shortest_length_encoding() {
        assert_eq!(frame(0x1, b"hi"), vec![0x81, 2, b'h', b'i']);
        let mid = frame(0x1, &[0; 300]);
        assert_eq!(&mid[..4], &[0x81, 126, 1, 44]);
        let big = frame(0x2, &[0; 70_000]);
        assert_eq!(&big[..2], &[0x82, 127]);
        assert_eq!(big.len(), 70_000 + 10);
    }

    #[tokio::test]
    async fn events_flow_out_pings_are_answered_and_a_close_ends_the_watch() {
        let (client, server) = tokio::io::duplex(4096);
        let (tx, rx) = mpsc::channel(4);
        let task = tokio::spawn(pump(server, rx));
        let (mut crd, mut cwr) = tokio::io::split(client);
        tx.send(Bytes::from_static(b"{\"type\":\"ADDED\"}\n"))
            .await
            .expect("send");
        let (op, payload) = read_frame(&mut crd).await.expect("read").expect("frame");
        assert_eq!(
            (op, payload.as_slice()),
            (0x1, &b"{\"type\":\"ADDED\"}\n"[..])
        );
        // A masked ping, as a client sends it.
        let mask = [1u8, 2, 3, 4];
        let mut ping = vec![0x89, 0x80 | 3];
        ping.extend_from_slice(&mask);
        ping.extend(b"abc".iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        cwr.write_all(&ping).await.expect("ping");
        let (op, payload) = read_frame(&mut crd).await.expect("read").expect("pong");
        assert_eq!((op, payload.as_slice()), (0xA, &b"abc"[..]));
        let mut close = vec![0x88, 0x80];
        close.extend_from_slice(&mask);
        cwr.write_all(&close).await.expect("close");
        let (op, _) = read_frame(&mut crd)
            .await
            .expect("read")
            .expect("close back");
        assert_eq!(op, 0x8);
        task.await.expect("pump ends");
        assert!(tx.is_closed(), "the watch's sender sees the end");
    }
}
