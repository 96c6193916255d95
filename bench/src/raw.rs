//! A minimal Streamable HTTP client for the `noop` call alone: pre-shaped JSON bodies over a keep-alive
//! pool, reading each reply to its end. It costs far less CPU per call than the rmcp client, so its rows
//! show what the server can do when the client is not sharing the two cores as heavily.

use crate::target::Era;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use std::sync::atomic::{AtomicU64, Ordering};

const LEGACY_VERSION: &str = "2025-11-25";
const MODERN_VERSION: &str = "2026-07-28";

pub struct RawHttp {
    http: reqwest::Client,
    url: String,
    era: Era,
    headers: HeaderMap,
    next_id: AtomicU64,
}

impl RawHttp {
    /// For the legacy era, runs the `initialize` handshake and keeps the session the server hands out (if
    /// any); the modern era needs no handshake.
    pub async fn connect(url: String, era: Era) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .map_err(|e| e.to_string())?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let mut client = Self {
            http,
            url,
            era,
            headers,
            next_id: AtomicU64::new(1),
        };
        match era {
            Era::Legacy => client.initialize().await?,
            Era::Modern => {
                client.insert("mcp-protocol-version", MODERN_VERSION)?;
                client.insert("mcp-method", "tools/call")?;
                client.insert("mcp-name", "noop")?;
            }
        }
        Ok(client)
    }

    fn insert(&mut self, name: &'static str, value: &str) -> Result<(), String> {
        let value = HeaderValue::from_str(value).map_err(|e| e.to_string())?;
        self.headers.insert(name, value);
        Ok(())
    }

    async fn initialize(&mut self) -> Result<(), String> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{LEGACY_VERSION}","capabilities":{{}},"clientInfo":{{"name":"mcp-bench-raw","version":"0"}}}}}}"#
        );
        let response = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response
            .text()
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        if !text.contains("\"protocolVersion\"") {
            return Err(format!("initialize: unexpected reply {text}"));
        }
        if let Some(session) = session {
            self.insert("mcp-session-id", &session)?;
        }
        self.insert("mcp-protocol-version", LEGACY_VERSION)?;
        let response = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .send()
            .await
            .map_err(|e| format!("notifications/initialized: {e}"))?;
        if !response.status().is_success() {
            return Err(format!(
                "notifications/initialized: HTTP {}",
                response.status()
            ));
        }
        Ok(())
    }

    pub async fn call_noop(&self) -> Result<(), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = match self.era {
            Era::Legacy => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"noop","arguments":{{}}}}}}"#
            ),
            Era::Modern => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"noop","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"mcp-bench-raw","version":"0"}}}}}}}}"#
            ),
        };
        let response = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        // Reading to the end (JSON body, or the SSE stream the server closes after the reply) keeps the
        // connection reusable.
        let text = response.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("HTTP {status}: {text}"));
        }
        if !text.contains("\"structuredContent\"") || text.contains("\"isError\":true") {
            return Err(format!("unexpected reply: {text}"));
        }
        Ok(())
    }
}
