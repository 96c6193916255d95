//! Attaching to a program the bridge did not start, and detaching from it: `debug_attach` to a debugpy
//! listener (`python -m debugpy --listen HOST:PORT`), `debug_detach` leaving the program running.

use super::backend::{DapBackend, Params, bool_param, str_param, u64_param};
use super::launch::AdapterKind;
use crate::envelope::ScriptError;
use serde_json::{Value, json};
use tokio::time::Instant;

impl DapBackend {
    /// `debug_attach {address: "host:port"}`: a `debug_start` of `{type: debugpy, request: attach, connect}`.
    pub(super) async fn attach(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let address = str_param(p, "address").unwrap_or_default();
        let (host, port) = parse_address(address)?;
        let config = json!({"type": "debugpy", "request": "attach", "name": format!("attach {host}:{port}"),
            "connect": {"host": host, "port": port}, "justMyCode": bool_param(p, "justMyCode").unwrap_or(true)});
        let mut start = Params::new();
        start.insert("config".into(), config);
        if let Some(w) = bool_param(p, "wait") {
            start.insert("wait".into(), json!(w));
        }
        if let Some(t) = u64_param(p, "timeoutMs") {
            start.insert("timeoutMs".into(), json!(t));
        }
        let mut result = self.start(&start, deadline).await?;
        result["attached"] = json!(format!("{host}:{port}"));
        Ok(result)
    }

    /// Ends the session but not an attached program. A launched one runs in its adapter's process group,
    /// which goes with the adapter: it ends either way, and the answer says so.
    pub(super) async fn detach(&self, p: &Params) -> Result<Value, ScriptError> {
        let session = self.session(p)?;
        let attached = session.is_attached();
        session.end(false).await;
        let note = if attached {
            "the program runs on without the debugger (its breakpoints removed)"
        } else {
            "the bridge launched this program: it ended with its debugger"
        };
        Ok(json!({"success": true, "sessionId": session.id, "detached": attached, "note": note}))
    }
}

/// The address of the debugpy listener a configuration attaches to (`connect: {host, port}`), if it does.
pub(super) fn listener(kind: AdapterKind, config: &Value) -> Option<String> {
    if kind != AdapterKind::Debugpy
        || config.get("request").and_then(Value::as_str) != Some("attach")
    {
        return None;
    }
    let connect = config.get("connect")?;
    let host = connect
        .get("host")
        .and_then(Value::as_str)
        .unwrap_or("127.0.0.1");
    let port = connect.get("port").and_then(Value::as_u64)?;
    Some(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// `host:port` (an IPv6 host in brackets), or `E_INVALID_PARAMS` naming the field.
fn parse_address(address: &str) -> Result<(String, u16), ScriptError> {
    let invalid = || {
        ScriptError::new(
            "E_INVALID_PARAMS",
            format!("address `{address}` is not host:port (e.g. 127.0.0.1:5678)"),
        )
        .details(json!({"field": "address"}))
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(invalid)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().map_err(|_| invalid())?;
    if host.is_empty() || port == 0 {
        return Err(invalid());
    }
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_name_the_field() {
        assert_eq!(
            parse_address("127.0.0.1:5678").ok(),
            Some(("127.0.0.1".to_owned(), 5678))
        );
        assert_eq!(parse_address("[::1]:9").ok(), Some(("::1".to_owned(), 9)));
        for bad in ["", "5678", "host:", "host:0", ":80", "h:99999"] {
            let e = parse_address(bad).err().map(|e| e.code);
            assert_eq!(e.as_deref(), Some("E_INVALID_PARAMS"), "{bad}");
        }
    }
}
