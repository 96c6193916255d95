//! The Lua client and its installer, served over plain HTTP by the link listener so a player installs with
//! one command: `wget run http://<host>:<port>/install.lua [token]`.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;

pub const CLIENT_LUA: &str = include_str!("../lua/client.lua");
pub const INSTALL_LUA: &str = include_str!("../lua/install.lua");

/// The WebSocket path computers link on.
pub const LINK_PATH: &str = "/link";

const LUA: &str = "text/x-lua; charset=utf-8";

#[derive(Clone)]
struct Assets {
    public_url: Option<Arc<str>>,
}

pub fn routes(public_url: Option<String>) -> Router {
    Router::new()
        .route("/install.lua", get(install))
        .route("/client.lua", get(client))
        .route("/", get(index))
        .with_state(Assets {
            public_url: public_url.map(Arc::from),
        })
}

/// The base URL computers reach us at: the configured public URL, else the Host they used to download this.
fn base_url(assets: &Assets, headers: &HeaderMap) -> Option<String> {
    if let Some(url) = &assets.public_url {
        return Some(url.to_string());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    // The host ends up inside a Lua string literal: allow host-name characters only.
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'));
    valid.then(|| format!("http://{host}"))
}

/// `http://h:p` → `ws://h:p/link`; `https` → `wss`.
pub fn link_url(base: &str) -> String {
    let ws = match base.strip_prefix("https://") {
        Some(rest) => format!("wss://{rest}"),
        None => format!("ws://{}", base.strip_prefix("http://").unwrap_or(base)),
    };
    format!("{}{LINK_PATH}", ws.trim_end_matches('/'))
}

async fn install(State(assets): State<Assets>, headers: HeaderMap) -> Response {
    let Some(base) = base_url(&assets, &headers) else {
        return (StatusCode::BAD_REQUEST, "missing or invalid Host header\n").into_response();
    };
    let body = installer(&base);
    per_host(
        ([(header::CONTENT_TYPE, LUA)], body).into_response(),
        &assets,
    )
}

/// Headers of a page built from the request's Host: a cache between the computers and the bridge must not
/// hand one Host's addresses to a request made with another.
fn per_host(mut response: Response, assets: &Assets) -> Response {
    if assets.public_url.is_none() {
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(header::VARY, HeaderValue::from_static("Host"));
    }
    response
}

/// The installer for computers that reach the bridge at `base`. The addresses go in as Lua string literals,
/// and the header comment (the command the player ran) as one too, so a configured URL with quotes,
/// backslashes or line breaks can neither break the file nor add code to it.
pub fn installer(base: &str) -> String {
    INSTALL_LUA
        .replace(
            "__MCP_INSTALL_URL__",
            lua_string(&format!("{base}/install.lua")).trim_matches('"'),
        )
        .replace("__MCP_HTTP_BASE__", &lua_string(base))
        .replace("__MCP_LINK_URL__", &lua_string(&link_url(base)))
}

/// `s` as a double-quoted Lua string literal: quotes, backslashes and every control or non-ASCII byte
/// escaped as `\ddd`, so the literal is one line of printable ASCII.
pub fn lua_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03}")),
        }
    }
    out.push('"');
    out
}

async fn client() -> Response {
    ([(header::CONTENT_TYPE, LUA)], CLIENT_LUA).into_response()
}

async fn index(State(assets): State<Assets>, headers: HeaderMap) -> Response {
    let base = base_url(&assets, &headers).unwrap_or_else(|| "http://<this-host>:<port>".into());
    let text = format!(
        "mcp-bridges ComputerCraft link.\n\nInstall the client on a computer or turtle:\n  wget run {base}/install.lua [token]\n\nComputers link on {}\n",
        link_url(&base)
    );
    per_host(
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response(),
        &assets,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_url_follows_the_scheme() {
        assert_eq!(link_url("http://10.0.0.2:3001"), "ws://10.0.0.2:3001/link");
        assert_eq!(link_url("https://mc.example/"), "wss://mc.example/link");
    }

    #[test]
    fn installer_placeholders_exist() {
        for p in [
            "__MCP_HTTP_BASE__",
            "__MCP_LINK_URL__",
            "__MCP_INSTALL_URL__",
        ] {
            assert!(INSTALL_LUA.contains(p), "{p}");
        }
    }

    #[test]
    fn lua_string_escapes_what_would_end_the_literal() {
        assert_eq!(lua_string("a\"b\\c\nd\u{e9}"), r#""a\"b\\c\010d\195\169""#);
    }
}
