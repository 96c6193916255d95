//! A minimal HTTP/1.1 client for Firecracker's API socket: one `PUT` of a JSON body per connection, one
//! bounded answer. Firecracker answers 204 on success and 400 with `{"fault_message": ...}` otherwise
//! (docs/protocols/sandbox.md §4); anything but 2xx becomes an error naming the endpoint and that message.

use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Bytes of an answer (headers and body) read at most: Firecracker's are a few hundred.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// `PUT endpoint` with `body`, within `within`. `Err` says which endpoint failed and why.
pub async fn put(
    socket: &Path,
    endpoint: &str,
    body: &serde_json::Value,
    within: Duration,
) -> Result<(), String> {
    let exchange = async {
        let mut s = UnixStream::connect(socket)
            .await
            .map_err(|e| format!("connect to {}: {e}", socket.display()))?;
        let body = body.to_string();
        let request = format!(
            "PUT {endpoint} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        read_response(&mut s).await
    };
    let (status, body) = match tokio::time::timeout(within, exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(why)) => return Err(format!("Firecracker's API, PUT {endpoint}: {why}")),
        Err(_) => {
            return Err(format!(
                "Firecracker's API, PUT {endpoint}: no answer within {} ms",
                within.as_millis()
            ));
        }
    };
    if (200..300).contains(&status) {
        return Ok(());
    }
    let fault = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["fault_message"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
    Err(format!(
        "Firecracker's API refused PUT {endpoint} (HTTP {status}): {fault}"
    ))
}

async fn read_response(s: &mut UnixStream) -> Result<(u16, Vec<u8>), String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(answer) = parse(&buf)? {
            return Ok(answer);
        }
        let n = s.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the connection closed before a whole answer".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_RESPONSE_BYTES {
            return Err(format!("an answer longer than {MAX_RESPONSE_BYTES} bytes"));
        }
    }
}

/// `Ok(None)` while the answer is incomplete; the status and body once `Content-Length` bytes arrived.
fn parse(buf: &[u8]) -> Result<Option<(u16, Vec<u8>)>, String> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| "headers are not UTF-8".to_string())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP status line: {status_line:?}"))?;
    let mut length = 0usize;
    for line in lines {
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value
                .trim()
                .parse()
                .map_err(|_| format!("bad Content-Length {value:?}"))?;
        }
    }
    if length > MAX_RESPONSE_BYTES {
        return Err(format!(
            "a body of {length} bytes, over the {MAX_RESPONSE_BYTES}-byte bound"
        ));
    }
    let body = &buf[end + 4..];
    if body.len() < length {
        return Ok(None);
    }
    Ok(Some((status, body[..length].to_vec())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_whole_only_with_its_body() {
        let full = b"HTTP/1.1 400 \r\nContent-Type: application/json\r\nContent-Length: 23\r\n\r\n{\"fault_message\":\"no\"}\n";
        assert_eq!(parse(&full[..20]).expect("fine"), None);
        assert_eq!(parse(&full[..full.len() - 2]).expect("fine"), None);
        let (status, body) = parse(full).expect("fine").expect("whole");
        assert_eq!(status, 400);
        assert_eq!(body, b"{\"fault_message\":\"no\"}\n");
        let empty = b"HTTP/1.1 204 \r\nServer: Firecracker API\r\n\r\n";
        assert_eq!(parse(empty).expect("fine"), Some((204, Vec::new())));
    }

    #[test]
    fn junk_and_oversized_answers_are_errors() {
        assert!(parse(b"SSH-2.0\r\n\r\n").is_err());
        let big = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            MAX_RESPONSE_BYTES + 1
        );
        let e = parse(big.as_bytes()).expect_err("over the bound");
        assert!(e.contains("65536"), "{e}");
    }

    #[tokio::test]
    async fn an_endless_answer_stops_at_the_bound() {
        let dir = std::env::temp_dir().join(format!("fc-api-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let sock = dir.join("api.sock");
        let _ = std::fs::remove_file(&sock);
        let listener = tokio::net::UnixListener::bind(&sock).expect("bind");
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut req = [0u8; 1024];
            let _ = s.read(&mut req).await;
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nX-Junk: ").await;
            let junk = vec![b'a'; 4096];
            while s.write_all(&junk).await.is_ok() {}
        });
        let e = put(
            &sock,
            "/machine-config",
            &serde_json::json!({}),
            Duration::from_secs(5),
        )
        .await
        .expect_err("bounded");
        assert!(
            e.contains("PUT /machine-config") && e.contains("65536"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
