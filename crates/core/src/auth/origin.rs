//! Which `Origin` headers may open a link.
//!
//! Any web page in the user's browser can open `ws://localhost:<port>`; the `Origin` header is the only thing
//! that tells such a page apart from the game. Game clients that are not browsers (ComputerCraft, native
//! tools) send no `Origin` at all, so whether that is accepted is a separate, explicit choice.
//!
//! The pattern grammar is in the `auth` module docs.

use crate::link::LinkError;

/// Whether a request that carries no `Origin` header may connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingOrigin {
    /// Accept it: the client is not a browser (ComputerCraft sends none).
    Accept,
    /// Reject it with 403.
    Reject,
}

/// An origin allow-list plus the rule for requests without an `Origin`. See the module docs for the syntax.
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    patterns: Vec<Pattern>,
    missing: MissingOrigin,
}

#[derive(Debug, Clone)]
enum Pattern {
    Any,
    Whole(String),
    Parts {
        scheme: String,
        host: HostPattern,
        port: PortPattern,
    },
}

#[derive(Debug, Clone)]
pub(super) enum HostPattern {
    Any,
    Exact(String),
    /// Stored with its leading dot: `.example.com`.
    SubdomainOf(String),
}

#[derive(Debug, Clone, Copy)]
enum PortPattern {
    Any,
    /// `None` is the scheme's default port.
    Exact(Option<u16>),
}

impl OriginPolicy {
    /// Builds a policy from patterns; fails on the first pattern it cannot understand.
    pub fn new<I, S>(patterns: I, missing: MissingOrigin) -> Result<Self, LinkError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let patterns = patterns
            .into_iter()
            .map(|p| parse_pattern(p.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Self { patterns, missing })
    }

    /// Pages served from this machine (`localhost`, `127.0.0.1`, `[::1]`, any port, http or https).
    pub fn localhost(missing: MissingOrigin) -> Self {
        let hosts = ["localhost", "127.0.0.1", "[::1]"];
        let patterns = ["http", "https"]
            .into_iter()
            .flat_map(|scheme| {
                hosts.into_iter().map(move |host| Pattern::Parts {
                    scheme: scheme.to_owned(),
                    host: HostPattern::Exact(host.to_owned()),
                    port: PortPattern::Any,
                })
            })
            .collect();
        Self { patterns, missing }
    }

    /// Every request, with or without an `Origin`. For tests and for links that rely on a token instead.
    pub fn any() -> Self {
        Self {
            patterns: vec![Pattern::Any],
            missing: MissingOrigin::Accept,
        }
    }

    /// This policy's patterns plus `other`'s; the rule for a missing `Origin` stays this policy's.
    pub fn with(mut self, other: OriginPolicy) -> Self {
        self.patterns.extend(other.patterns);
        self
    }

    /// Whether a request with this `Origin` header (or none) may connect.
    pub fn allows(&self, origin: Option<&str>) -> bool {
        let Some(origin) = origin else {
            return self.missing == MissingOrigin::Accept;
        };
        let origin = origin.trim().to_ascii_lowercase();
        let parsed = split_origin(&origin);
        self.patterns.iter().any(|p| match (p, &parsed) {
            (Pattern::Any, _) => true,
            (Pattern::Whole(w), _) => *w == origin,
            (Pattern::Parts { .. }, None) => false,
            (Pattern::Parts { scheme, host, port }, Some(o)) => {
                *scheme == o.scheme && host.matches(o.host) && port.matches(o.port)
            }
        })
    }
}

impl HostPattern {
    /// `*`, `*.domain` or an exact host (lowercase already); the error says what is wrong.
    pub(super) fn parse(host: &str) -> Result<Self, &'static str> {
        if host == "*" {
            Ok(Self::Any)
        } else if let Some(domain) = host.strip_prefix("*.") {
            if domain.is_empty() || domain.contains('*') {
                return Err("`*.` must be followed by a domain");
            }
            Ok(Self::SubdomainOf(format!(".{domain}")))
        } else if host.contains('*') {
            Err("`*` is allowed only as the whole host or as a leading `*.`")
        } else {
            Ok(Self::Exact(host.to_owned()))
        }
    }

    pub(super) fn matches(&self, host: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Exact(h) => h == host,
            Self::SubdomainOf(suffix) => {
                host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        }
    }
}

impl PortPattern {
    fn matches(self, port: Option<u16>) -> bool {
        match self {
            Self::Any => true,
            Self::Exact(p) => p == port,
        }
    }
}

struct Origin<'a> {
    scheme: &'a str,
    host: &'a str,
    /// `None` when absent or the scheme's default.
    port: Option<u16>,
}

/// `scheme://host[:port]` with a non-empty host, lowercased already; `None` for anything else.
fn split_origin(s: &str) -> Option<Origin<'_>> {
    let (scheme, rest) = s.split_once("://")?;
    let (host, port) = split_host_port(rest)?;
    let port = match port {
        None => None,
        Some(p) => {
            let p: u16 = p.parse().ok()?;
            (Some(p) != default_port(scheme)).then_some(p)
        }
    };
    Some(Origin { scheme, host, port })
}

/// Splits `host[:port]`, brackets kept on IPv6 hosts. `None` when empty or when a path follows.
pub(super) fn split_host_port(rest: &str) -> Option<(&str, Option<&str>)> {
    if rest.is_empty() || rest.contains('/') {
        return None;
    }
    if rest.starts_with('[') {
        let end = rest.find(']')?;
        let (host, after) = rest.split_at(end + 1);
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match rest.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => Some((host, Some(port))),
        Some(_) => None,
        None => Some((rest, None)),
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

fn parse_pattern(raw: &str) -> Result<Pattern, LinkError> {
    let invalid = |reason: &str| LinkError::InvalidOriginPattern {
        pattern: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let p = raw.trim().to_ascii_lowercase();
    if p.is_empty() {
        return Err(invalid("empty pattern"));
    }
    if p == "*" {
        return Ok(Pattern::Any);
    }
    let Some((scheme, rest)) = p.split_once("://") else {
        return Ok(Pattern::Whole(p));
    };
    if rest.is_empty() {
        return Ok(Pattern::Whole(p));
    }
    if scheme.is_empty() || scheme.contains('*') {
        return Err(invalid("the scheme must be spelled out"));
    }
    if rest.contains('/') {
        return Err(invalid(
            "an origin has no path; drop everything after the host and port",
        ));
    }
    let (host, port) =
        split_host_port(rest).ok_or_else(|| invalid("expected scheme://host[:port]"))?;
    let host = HostPattern::parse(host).map_err(invalid)?;
    let port = match port {
        None => PortPattern::Exact(None),
        Some("*") => PortPattern::Any,
        Some(p) => {
            let n: u16 = p
                .parse()
                .map_err(|_| invalid("the port must be a number or `*`"))?;
            PortPattern::Exact((Some(n) != default_port(scheme)).then_some(n))
        }
    };
    Ok(Pattern::Parts {
        scheme: scheme.to_owned(),
        host,
        port,
    })
}
