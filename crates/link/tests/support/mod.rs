//! A peer over an in-memory byte stream, and the far end to play the other side with, for the link tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bridge_link::stream::{self, StreamConfig};
use bridge_link::{Connection, FrameCodec, Framing, LinkError, Peer, parse_id};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

pub const FRAMINGS: [Framing; 3] = [
    Framing::Lines,
    Framing::ContentLength,
    Framing::LengthPrefixed,
];

/// The bridge's frame limit in these tests.
pub const LIMIT: usize = 1024;

pub struct Pair {
    pub peer: Peer<Value>,
    /// The other side, framed the same way, with a generous limit of its own.
    pub remote: Framed<DuplexStream, FrameCodec>,
    /// Ends with the link's close reason.
    pub served: JoinHandle<LinkError>,
}

/// Serves `conn` as a JSON-RPC-ish peer: frames with one of our ids resolve that request.
pub fn serve_peer(conn: Connection) -> (Peer<Value>, JoinHandle<LinkError>) {
    let peer = Peer::new(conn.sender);
    let resolver = peer.clone();
    let server = peer.clone();
    let served = tokio::spawn(async move {
        server
            .serve(conn.incoming, move |text| {
                let Ok(value) = serde_json::from_str::<Value>(&text) else {
                    return;
                };
                if let Some(id) = value.get("id").and_then(parse_id) {
                    resolver.resolve(id, value);
                }
            })
            .await
    });
    (peer, served)
}

/// A line-framed link over an in-memory pipe of `buffer` bytes, and the pipe's far end.
pub fn lines_link(buffer: usize) -> (Connection, DuplexStream) {
    let (ours, theirs) = tokio::io::duplex(buffer);
    let (read, write) = tokio::io::split(ours);
    let cfg = StreamConfig::new(Framing::Lines);
    (
        stream::spawn(read, write, cfg, &CancellationToken::new()),
        theirs,
    )
}

pub fn pair(framing: Framing) -> Pair {
    let (ours, theirs) = tokio::io::duplex(64 << 10);
    let (read, write) = tokio::io::split(ours);
    let cfg = StreamConfig {
        framing,
        max_frame_bytes: LIMIT,
    };
    let conn = stream::spawn(read, write, cfg, &CancellationToken::new());
    let (peer, served) = serve_peer(conn);
    Pair {
        peer,
        remote: Framed::new(theirs, FrameCodec::new(framing, 1 << 20)),
        served,
    }
}

pub fn request(id: u64, method: &str) -> String {
    json!({"id": id, "method": method}).to_string()
}

/// Reads one request from the far end.
pub async fn next_request<S>(remote: &mut S) -> Value
where
    S: futures::Stream<Item = Result<String, bridge_link::FrameError>> + Unpin,
{
    let text = within("a request", remote.next()).await.unwrap().unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Answers `request` with its own method name as the result.
pub async fn answer<S>(remote: &mut S, request: &Value)
where
    S: futures::Sink<String, Error = bridge_link::FrameError> + Unpin,
{
    let reply = json!({"id": request["id"], "result": request["method"]});
    remote.send(reply.to_string()).await.unwrap();
}

/// Awaits `fut`, panicking with `what` after 60 s: a hung test names what it was waiting for. Generous,
/// because CI machines are shared and slow; tests never assert speed.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}
