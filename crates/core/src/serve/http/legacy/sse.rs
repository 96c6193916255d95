//! The SSE bodies of front answers, written as rmcp writes them.

use super::*;

/// rmcp's SSE keep-alive (`StreamableHttpServerConfig::sse_keep_alive`, 15 s): a comment when nothing else
/// was sent for this long.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The whole stream of a request that has answered: the priming event, the notes, the answer.
pub(super) fn finished(
    number: u64,
    notes: &[ServerSseMessage],
    answer: &inline::Answer,
) -> Vec<u8> {
    let mut body = Vec::with_capacity(512);
    write_priming(&mut body, number);
    for note in notes {
        write_event(&mut body, note);
    }
    body.extend_from_slice(b"data: ");
    if let Err(e) = answer.write(&mut body) {
        tracing::error!("an answer could not be serialised: {e}");
    }
    body.extend_from_slice(b"\nid: ");
    write_number(&mut body, notes.len() as u64 + 1);
    body.push(b'/');
    write_number(&mut body, number);
    body.extend_from_slice(b"\n\n");
    body
}

fn write_priming(body: &mut Vec<u8>, number: u64) {
    body.extend_from_slice(b"data: \nid: 0/");
    write_number(body, number);
    body.extend_from_slice(b"\nretry: ");
    write_number(body, RETRY_MS);
    body.extend_from_slice(b"\n\n");
}

/// `n` in decimal, as `Display` writes it, without the formatting machinery (a tenth of a call's own work).
fn write_number(body: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    body.extend_from_slice(&digits[at..]);
}

/// An event as rmcp's SSE body writes it (`sse_stream::Sse` into bytes).
fn write_event(body: &mut Vec<u8>, event: &ServerSseMessage) {
    body.extend_from_slice(b"data: ");
    if let Some(message) = &event.message
        && let Err(e) = serde_json::to_writer(&mut *body, &**message)
    {
        tracing::error!("a message could not be serialised: {e}");
    }
    body.push(b'\n');
    if let Some(id) = &event.event_id {
        body.extend_from_slice(b"id: ");
        body.extend_from_slice(id.as_bytes());
        body.push(b'\n');
    }
    if let Some(retry) = event.retry {
        body.extend_from_slice(format!("retry: {}\n", retry.as_millis()).as_bytes());
    }
    body.push(b'\n');
}

fn event_bytes(event: &ServerSseMessage) -> Bytes {
    let mut body = Vec::with_capacity(256);
    write_event(&mut body, event);
    Bytes::from(body)
}

/// rmcp's SSE response headers.
fn sse_response(body: Body) -> Response {
    static ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.reserve(3);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(ACCEL_BUFFERING.clone(), HeaderValue::from_static("no"));
    response
}

pub(super) fn sse_body(body: Vec<u8>) -> Response {
    sse_response(Body::from(body))
}

/// The stream of a call that waits: the priming event, then what comes, a keep-alive comment when nothing
/// came for [`KEEP_ALIVE`]; it ends when the call's sender goes.
pub(super) fn streaming_body(
    first: ServerSseMessage,
    rx: mpsc::Receiver<ServerSseMessage>,
) -> Response {
    let events = futures::stream::unfold((Some(first), rx), |(mut first, mut rx)| async move {
        if let Some(first) = first.take() {
            return Some((
                Ok::<_, std::convert::Infallible>(event_bytes(&first)),
                (None, rx),
            ));
        }
        tokio::select! {
            message = rx.recv() => message.map(|m| (Ok(event_bytes(&m)), (None, rx))),
            () = tokio::time::sleep(KEEP_ALIVE) => Some((Ok(Bytes::from_static(b":\n\n")), (None, rx))),
        }
    });
    sse_response(Body::from_stream(events))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn numbers_are_written_as_display_writes_them() {
        for n in [0, 7, 10, 99, 100, 4096, u64::from(u32::MAX), u64::MAX] {
            let mut body = Vec::new();
            write_number(&mut body, n);
            assert_eq!(body, n.to_string().into_bytes());
        }
    }
}
