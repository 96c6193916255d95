//! Who may talk to a listener: one origin-pattern grammar, one host check and one token check, for the MCP
//! HTTP transport and the link listeners alike.
//!
//! Every check runs on the request head before anything else happens, and a refusal is a real HTTP status
//! (403 for origin and host, 401 for the token) with a plain-text reason, so a person looking at a failed
//! connection learns which setting to change.
//!
//! - [`OriginPolicy`]: which `Origin` headers may connect (grammar below); whether a
//!   request without one may ([`MissingOrigin`]).
//! - [`HostPolicy`]: which `Host` headers are accepted (DNS-rebinding protection for HTTP): `host` (any
//!   port), `host:port`, `*.domain`, `*`, IPv6 in brackets. Case is ignored.
//! - [`Token`]: a shared secret compared in constant time, presented as `Authorization: Bearer <token>`
//!   (and, where the client cannot set headers, as `?token=`).
//! - [`Access`]: the three together; [`Access::check`] gives `Ok` or a [`Refusal`].
//!
//! Origin pattern syntax (matching ignores ASCII case):
//!
//! | pattern                  | matches                                                                      |
//! |--------------------------|------------------------------------------------------------------------------|
//! | `*`                      | any origin that is present                                                   |
//! | `http://localhost`       | exactly that scheme and host, default port (80 here; 443 for https/wss)      |
//! | `http://localhost:8080`  | that port only                                                               |
//! | `http://localhost:*`     | any port, or none                                                            |
//! | `https://*.example.com`  | any subdomain, at any depth, of example.com; not example.com itself          |
//! | `https://*`              | any host with that scheme                                                    |
//! | `null`, `file://`        | anything without a host part is compared as a whole string (browsers send `null` for `file://` pages) |
//!
//! IPv6 hosts are written in brackets: `http://[::1]:*`. A pattern with a path (`http://a/b`) is rejected.

mod origin;

pub use origin::{MissingOrigin, OriginPolicy};

use crate::link::LinkError;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use origin::{HostPattern, split_host_port};
use std::sync::Arc;

/// A shared secret. `Debug` never shows it.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    pub fn new(secret: impl AsRef<str>) -> Self {
        Self(Arc::from(secret.as_ref()))
    }

    /// Compares without an early exit, so response timing does not reveal how much of a guess was right.
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(presented.as_bytes(), self.0.as_bytes())
    }
}

/// Equal length and equal bytes, in time that depends on the length only.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization: Bearer <token>` header (scheme case ignored), if there is one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The host a request names, as [`HostPolicy::allows`] reads it: its `Host` header, or HTTP/2's
/// `:authority` pseudo-header, which hyper puts in the URI. `None` when there is neither, or the header is not
/// text.
pub fn request_host<'a>(headers: &'a HeaderMap, uri: &'a http::Uri) -> Option<&'a str> {
    match headers.get(header::HOST) {
        Some(v) => v.to_str().ok(),
        None => uri.authority().map(|a| a.as_str()),
    }
}

/// Accepted `Host` headers. See the module docs for the grammar.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    hosts: Vec<(HostPattern, Option<u16>)>,
}

impl HostPolicy {
    /// `localhost`, `127.0.0.1` and `[::1]` on any port, plus `extra`.
    pub fn localhost_and<I, S>(extra: I) -> Result<Self, LinkError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut hosts = Vec::new();
        for h in ["localhost", "127.0.0.1", "[::1]"] {
            hosts.push((HostPattern::Exact(h.to_owned()), None));
        }
        for raw in extra {
            hosts.push(parse_host(raw.as_ref())?);
        }
        Ok(Self { hosts })
    }

    /// Whether a `Host` header value is accepted.
    pub fn allows(&self, host: &str) -> bool {
        self.allows_as_sent(host) || self.allows_read(host)
    }

    /// What clients send, checked without reading the value apart: an accepted name on any port, as it is
    /// (lower case, no spaces), alone or with `:` and a port in plain digits. This runs on every request,
    /// and splitting, trimming and parsing cost about 600 instructions. Accepts only what
    /// [`allows_read`](Self::allows_read) accepts; anything else is left to it.
    fn allows_as_sent(&self, host: &str) -> bool {
        self.hosts.iter().any(|(pattern, want)| {
            let (HostPattern::Exact(name), None) = (pattern, want) else {
                return false;
            };
            let Some(rest) = host.strip_prefix(name.as_str()) else {
                return false;
            };
            let Some(port) = rest.strip_prefix(':') else {
                return rest.is_empty();
            };
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u16>().is_ok()
        })
    }

    /// [`allows`](Self::allows), the value read apart: trimmed, lowered, split into host and port.
    fn allows_read(&self, host: &str) -> bool {
        // Lowered only when it has capitals: what clients send is lower case already.
        let host = host.trim();
        let lowered;
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            lowered = host.to_ascii_lowercase();
            lowered.as_str()
        } else {
            host
        };
        let Some((name, port)) = split_host_port(host) else {
            return false;
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(p) => Some(p),
                Err(_) => return false,
            },
        };
        self.hosts
            .iter()
            .any(|(pattern, want)| pattern.matches(name) && want.is_none_or(|w| Some(w) == port))
    }
}

fn parse_host(raw: &str) -> Result<(HostPattern, Option<u16>), LinkError> {
    let invalid = |reason: &str| LinkError::InvalidOriginPattern {
        pattern: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let lower = raw.trim().to_ascii_lowercase();
    // A bare IPv6 address (`::1`) has colons but no port; bracket it so the grammar is one.
    let bracketed = if lower.contains("::") && !lower.starts_with('[') {
        format!("[{lower}]")
    } else {
        lower
    };
    let (host, port) =
        split_host_port(&bracketed).ok_or_else(|| invalid("expected host or host:port"))?;
    let port = port
        .map(|p| {
            p.parse::<u16>()
                .map_err(|_| invalid("the port must be a number"))
        })
        .transpose()?;
    Ok((HostPattern::parse(host).map_err(invalid)?, port))
}

/// Why a request was refused, and how to answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub reason: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let challenge = self.status == StatusCode::UNAUTHORIZED;
        let mut response = (self.status, format!("{}\n", self.reason)).into_response();
        if challenge {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The metadata documents an OAuth client looks for (RFC 9728's protected resource, RFC 8414's authorization
/// server, OpenID Connect discovery), at the root or with the resource's path before or after them.
fn is_oauth_discovery(path: &str) -> bool {
    const DOCUMENTS: [&str; 3] = [
        "oauth-protected-resource",
        "oauth-authorization-server",
        "openid-configuration",
    ];
    let mut segments = path.split('/');
    while let Some(segment) = segments.next() {
        if segment == ".well-known" {
            return segments.next().is_some_and(|doc| DOCUMENTS.contains(&doc));
        }
    }
    false
}

/// Origin, host and token rules of one listener.
#[derive(Debug, Clone)]
pub struct Access {
    pub origins: OriginPolicy,
    /// `None`: any `Host` (links dialled by game clients, which send whatever address they were given).
    pub hosts: Option<HostPolicy>,
    pub token: Option<Token>,
    /// What a refused client is told to send, e.g. "Authorization: Bearer <MCP_TOKEN>".
    pub token_hint: &'static str,
}

impl Access {
    /// Only an origin policy: any host, no token.
    pub fn origins(origins: OriginPolicy) -> Self {
        Self {
            origins,
            hosts: None,
            token: None,
            token_hint: "the token",
        }
    }

    /// Checks a request head. `query_token` is the `?token=` parameter where the listener accepts one.
    pub fn check(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        query_token: Option<&str>,
    ) -> Result<(), Refusal> {
        let forbidden = |reason: String| Refusal {
            status: StatusCode::FORBIDDEN,
            reason,
        };
        if let Some(hosts) = &self.hosts {
            match request_host(headers, uri) {
                Some(h) if hosts.allows(h) => {}
                Some(h) => return Err(forbidden(format!("Host {h} is not allowed"))),
                None => {
                    return Err(forbidden(
                        "a request without a Host header is not allowed".into(),
                    ));
                }
            }
        }
        let origin = match headers.get(header::ORIGIN).map(|v| v.to_str()) {
            None => None,
            Some(Ok(o)) => Some(o),
            Some(Err(_)) => return Err(forbidden("origin header is not valid text".into())),
        };
        if !self.origins.allows(origin) {
            return Err(forbidden(match origin {
                Some(o) => format!("origin {o} is not allowed"),
                None => "a request without an Origin header is not allowed".to_owned(),
            }));
        }
        if self.token.is_some() && is_oauth_discovery(uri.path()) {
            // A 401 here tells an MCP client (the TypeScript SDK's, the Inspector's) that this server speaks
            // OAuth, and it goes off to register a client instead of sending the bearer token it was given.
            // There is no OAuth here: say so with a plain 404, whoever asks.
            return Err(Refusal {
                status: StatusCode::NOT_FOUND,
                reason: format!(
                    "no OAuth authorization here: this server takes a bearer token; send {}",
                    self.token_hint
                ),
            });
        }
        if let Some(expected) = &self.token {
            let ok = [bearer(headers), query_token]
                .into_iter()
                .flatten()
                .any(|t| expected.matches(t));
            if !ok {
                return Err(Refusal {
                    status: StatusCode::UNAUTHORIZED,
                    reason: format!("missing or wrong token: send {}", self.token_hint),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check of what clients usually send accepts only what the whole reading accepts, and together
    /// they accept what the reading alone does.
    #[test]
    fn a_host_as_sent_is_accepted_only_as_the_whole_reading_accepts_it() {
        let policies = [
            HostPolicy::localhost_and(Vec::<String>::new()).unwrap(),
            HostPolicy::localhost_and(["example.com:8080", "*.example.org", "[::2]", "Other.Test"])
                .unwrap(),
            HostPolicy::localhost_and(["*"]).unwrap(),
        ];
        let hosts = [
            "localhost",
            "localhost:",
            "localhost:1",
            "localhost:8080",
            "localhost:65535",
            "localhost:65536",
            "localhost:99999",
            "localhost:+80",
            "localhost:-1",
            "localhost:80x",
            "localhost:8080:1",
            "localhostx:80",
            "localhos",
            "LOCALHOST:80",
            " localhost:80 ",
            "localhost:80/",
            "127.0.0.1",
            "127.0.0.1:18931",
            "127.0.0.10:80",
            "127.0.0.1.evil:80",
            "[::1]",
            "[::1]:80",
            "[::1]x",
            "[::1]:",
            "::1",
            "[::2]:5",
            "example.com:8080",
            "example.com:8081",
            "example.com",
            "a.example.org:1",
            "example.org",
            "other.test:3",
            "Other.Test",
            "",
            ":80",
            "évil:80",
        ];
        for (i, policy) in policies.iter().enumerate() {
            for host in hosts {
                let read = policy.allows_read(host);
                if policy.allows_as_sent(host) {
                    assert!(
                        read,
                        "policy {i}: {host:?} accepted as sent, refused when read"
                    );
                }
                assert_eq!(policy.allows(host), read, "policy {i}: {host:?}");
            }
            assert!(policy.allows_as_sent("127.0.0.1:18931"), "policy {i}");
            assert!(policy.allows_as_sent("localhost"), "policy {i}");
            assert!(policy.allows_as_sent("[::1]:8080"), "policy {i}");
        }
    }

    fn with_token() -> Access {
        Access {
            origins: OriginPolicy::any(),
            hosts: None,
            token: Some(Token::new("s3cret")),
            token_hint: "Authorization: Bearer <MCP_TOKEN>",
        }
    }

    fn check(access: &Access, path: &str, auth: Option<&str>) -> Result<(), Refusal> {
        let uri: Uri = path.parse().unwrap_or_default();
        let mut headers = HeaderMap::new();
        if let Some(auth) = auth.and_then(|a| HeaderValue::from_str(a).ok()) {
            headers.insert(header::AUTHORIZATION, auth);
        }
        access.check(&uri, &headers, None)
    }

    #[test]
    fn oauth_discovery_is_not_found_with_or_without_the_token() {
        let access = with_token();
        for path in [
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server",
            "/.well-known/oauth-authorization-server/mcp",
            "/.well-known/openid-configuration",
            "/mcp/.well-known/openid-configuration",
        ] {
            for auth in [None, Some("Bearer s3cret")] {
                let refusal = check(&access, path, auth).err();
                assert_eq!(
                    refusal.as_ref().map(|r| r.status),
                    Some(StatusCode::NOT_FOUND),
                    "{path} {auth:?}"
                );
                let response = refusal.map(IntoResponse::into_response);
                assert!(
                    response.is_some_and(|r| !r.headers().contains_key(header::WWW_AUTHENTICATE)),
                    "a 404 must not challenge: {path}"
                );
            }
        }
    }

    #[test]
    fn a_missing_token_is_a_401_that_names_the_header_and_no_oauth_metadata() {
        let access = with_token();
        for path in ["/mcp", "/health", "/.well-known/other"] {
            let Err(refusal) = check(&access, path, None) else {
                panic!("{path} passed without a token");
            };
            assert_eq!(refusal.status, StatusCode::UNAUTHORIZED);
            assert!(
                refusal.reason.contains("Authorization: Bearer <MCP_TOKEN>"),
                "{}",
                refusal.reason
            );
            let response = refusal.into_response();
            let challenge = response
                .headers()
                .get(header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            assert!(challenge.starts_with("Bearer"), "{challenge}");
            assert!(!challenge.contains("resource_metadata"), "{challenge}");
        }
        assert_eq!(check(&access, "/mcp", Some("Bearer s3cret")), Ok(()));
    }

    #[test]
    fn without_a_token_discovery_paths_are_left_to_the_router() {
        let access = Access::origins(OriginPolicy::any());
        assert_eq!(
            check(&access, "/.well-known/oauth-protected-resource", None),
            Ok(())
        );
    }
}
