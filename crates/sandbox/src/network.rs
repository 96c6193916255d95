//! A sandbox's network, by policy: `none` (only `lo`; a connection anywhere else fails at once with
//! ENETUNREACH, as the namespace has no route) or `egress` (outbound only, through pasta, a user-mode network
//! stack that needs no root on the host, with DNS; and an nftables filter loaded into the sandbox's own
//! network namespace before anything runs there). The wire facts are in docs/protocols/egress.md.
//!
//! The filter, in order: the sandbox's own `lo` is free; DNS only to the stack's resolver; then the
//! allow-list's entries (addresses, CIDRs, host names resolved here at create time, each with optional
//! ports); with an empty allow-list, any destination but the host's own addresses; everything else is
//! refused at once (`reject with icmpx admin-prohibited`: EHOSTUNREACH on a TCP connect, EPERM on a UDP send).
//! A host name's later DNS answers are not followed: an address it resolves to after the create is refused.

use bridge_core::ToolError;
use sandbox_agent::launch::Network;
use serde::Serialize;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Where pasta answers DNS inside an egress sandbox (forwarded to the host's first resolver). A link-local
/// address: it is routed through the sandbox's interface to pasta and names nothing on any real network.
pub const RESOLVER: &str = "169.254.0.53";

/// How many allow-list entries a sandbox may have, and the longest one.
pub const MAX_ALLOW: usize = 64;
const MAX_ENTRY: usize = 260;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Only `lo`: nothing outside the sandbox is reachable, and a connection attempt fails at once.
    None,
    /// Outbound connections through a user-mode network stack (pasta), with DNS, limited by the allow-list.
    Egress,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Egress => "egress",
        }
    }

    pub fn parse(field: &str, text: &str) -> Result<Self, ToolError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Self::None),
            "egress" => Ok(Self::Egress),
            _ => Err(ToolError::invalid_argument(
                field,
                format!("{text:?} is not a network policy: `none` or `egress`"),
            )),
        }
    }
}

/// The network flags: the default policy and allow-list, and the programs egress uses.
#[derive(Debug, Clone, clap::Args)]
pub struct NetworkArgs {
    /// A sandbox's network when create_sandbox names none: `none` (only lo) or `egress` (outbound through
    /// pasta, limited by --sandbox-network-allow).
    #[arg(
        long = "sandbox-network",
        env = "SANDBOX_NETWORK",
        value_enum,
        default_value = "none"
    )]
    pub sandbox_network: Policy,
    /// Where an egress sandbox may connect when create_sandbox gives no list: comma-separated host names,
    /// addresses or CIDRs, each with an optional `:port` or `:low-high` (IPv6 in brackets). Empty: anywhere
    /// but the host's own addresses.
    #[arg(
        long = "sandbox-network-allow",
        env = "SANDBOX_NETWORK_ALLOW",
        value_delimiter = ','
    )]
    pub sandbox_network_allow: Vec<String>,
    /// The user-mode network stack (Debian's `passt` package).
    #[arg(long = "sandbox-pasta", env = "SANDBOX_PASTA", default_value = "pasta")]
    pub sandbox_pasta: PathBuf,
    /// nftables' `nft`, which loads an egress sandbox's filter into its namespace (Debian's `nftables`).
    #[arg(long = "sandbox-nft", env = "SANDBOX_NFT", default_value = "nft")]
    pub sandbox_nft: PathBuf,
}

#[derive(Debug, Clone)]
pub struct NetworkSettings {
    pub default: Policy,
    pub allow: Vec<String>,
    pub pasta: PathBuf,
    pub nft: PathBuf,
}

impl NetworkArgs {
    /// Checks the default allow-list's syntax at start (names are resolved per create).
    pub fn settings(&self) -> Result<NetworkSettings, String> {
        let allow: Vec<String> = self
            .sandbox_network_allow
            .iter()
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty())
            .collect();
        for e in &allow {
            Entry::parse(e).map_err(|why| format!("SANDBOX_NETWORK_ALLOW: {why}"))?;
        }
        Ok(NetworkSettings {
            default: self.sandbox_network,
            allow,
            pasta: self.sandbox_pasta.clone(),
            nft: self.sandbox_nft.clone(),
        })
    }
}

/// One allow-list entry: a destination and an optional port range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub target: Target,
    pub ports: Option<(u16, u16)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Net(IpAddr, u8),
    Name(String),
}

impl Entry {
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() || text.len() > MAX_ENTRY {
            return Err(format!(
                "{text:?}: an entry is a host name, address or CIDR of 1 to {MAX_ENTRY} characters"
            ));
        }
        let (host, ports) = if let Some(rest) = text.strip_prefix('[') {
            let (h, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("{text:?}: `[` without `]`"))?;
            let ports = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("{text:?}: `]` must be followed by `:port`"))?,
                ),
            };
            (h, ports)
        } else if text.matches(':').count() > 1 {
            (text, None)
        } else {
            match text.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (text, None),
            }
        };
        let ports = ports.map(|p| parse_ports(text, p)).transpose()?;
        let target = if let Some((addr, len)) = host.split_once('/') {
            let addr: IpAddr = addr
                .parse()
                .map_err(|_| format!("{text:?}: {addr:?} is not an IP address"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len: u8 = len
                .parse()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?;
            Target::Net(mask(addr, len), len)
        } else if let Ok(addr) = host.parse::<IpAddr>() {
            Target::Net(addr, if addr.is_ipv4() { 32 } else { 128 })
        } else if host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            && host.chars().any(|c| c.is_ascii_alphabetic())
            && !host.starts_with(['-', '.'])
        {
            Target::Name(host.to_ascii_lowercase())
        } else {
            return Err(format!(
                "{text:?}: {host:?} is not a host name, an IP address or a CIDR"
            ));
        };
        Ok(Self { target, ports })
    }
}

fn parse_ports(text: &str, p: &str) -> Result<(u16, u16), String> {
    let bad = || format!("{text:?}: {p:?} is not a port (1-65535) or a range low-high");
    let (lo, hi) = p.split_once('-').unwrap_or((p, p));
    let lo: u16 = lo.parse().map_err(|_| bad())?;
    let hi: u16 = hi.parse().map_err(|_| bad())?;
    if lo == 0 || hi < lo {
        return Err(bad());
    }
    Ok((lo, hi))
}

fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// The network a create asks for, resolved: the agent's launch part, and what the tools report.
#[derive(Debug, Clone)]
pub struct Plan {
    pub policy: Policy,
    pub launch: Network,
    pub report: Value,
}

impl Plan {
    pub fn none() -> Self {
        Self {
            policy: Policy::None,
            launch: Network::default(),
            report: json!({"policy": "none"}),
        }
    }
}

/// Resolves a create's `network` and `network_allow` (or the server's defaults) into a plan.
pub async fn plan(
    s: &NetworkSettings,
    backend: crate::backend::BackendKind,
    policy: Option<&str>,
    allow: Option<&[String]>,
) -> Result<Plan, ToolError> {
    let policy = match policy {
        Some(p) => Policy::parse("network", p)?,
        None => s.default,
    };
    if policy == Policy::None {
        if allow.is_some_and(|a| !a.is_empty()) {
            return Err(ToolError::invalid_argument(
                "network_allow",
                "an allow-list needs `network: \"egress\"`; this sandbox would have no network",
            ));
        }
        return Ok(Plan::none());
    }
    if backend != crate::backend::BackendKind::Namespace {
        return Err(ToolError::invalid_argument(
            "network",
            format!(
                "`network: egress` is available on the namespace backend only; this server's sandboxes are {}",
                format!("{backend:?}").to_lowercase()
            ),
        ));
    }
    let texts: Vec<String> = match allow {
        Some(a) => a.iter().map(|e| e.trim().to_string()).collect(),
        None => s.allow.clone(),
    };
    if texts.len() > MAX_ALLOW {
        return Err(ToolError::invalid_argument(
            "network_allow",
            format!(
                "{} entries; a sandbox may have at most {MAX_ALLOW}",
                texts.len()
            ),
        )
        .with_details(json!({"limit": MAX_ALLOW})));
    }
    let mut entries = Vec::new();
    for t in &texts {
        entries.push((
            t.clone(),
            Entry::parse(t).map_err(|why| ToolError::invalid_argument("network_allow", why))?,
        ));
    }
    let pasta = find_program(&s.pasta).ok_or_else(|| {
        ToolError::unsupported(format!(
            "`egress` needs pasta ({}), which is not installed: apt-get install passt (or set SANDBOX_PASTA)",
            s.pasta.display()
        ))
    })?;
    let nft = find_program(&s.nft).ok_or_else(|| {
        ToolError::unsupported(format!(
            "`egress` needs nft ({}), which is not installed: apt-get install nftables (or set SANDBOX_NFT)",
            s.nft.display()
        ))
    })?;
    let mut rules = Vec::new();
    let mut resolved = Vec::new();
    for (text, e) in &entries {
        let nets: Vec<(IpAddr, u8)> = match &e.target {
            Target::Net(a, l) => vec![(*a, *l)],
            Target::Name(name) => {
                let addrs = resolve(name).await.map_err(|why| {
                    ToolError::invalid_argument(
                        "network_allow",
                        format!("{text:?}: {name} does not resolve here: {why}"),
                    )
                })?;
                addrs
                    .into_iter()
                    .map(|a| (a, if a.is_ipv4() { 32 } else { 128 }))
                    .collect()
            }
        };
        resolved.push(json!({
            "entry": text,
            "addresses": nets.iter().map(|(a, l)| format!("{a}/{l}")).collect::<Vec<_>>(),
        }));
        for (a, l) in nets {
            rules.push(accept_rule(a, l, e.ports));
        }
    }
    let host = host_addresses();
    let ruleset = ruleset(&rules, entries.is_empty(), &host);
    let report = json!({
        "policy": "egress",
        "stack": "pasta (user-mode; the host's loopback not mapped, no port forwarded either way)",
        "dns": RESOLVER,
        "allow": if entries.is_empty() {
            json!("anywhere but the host's own addresses")
        } else {
            json!(resolved)
        },
        "refused": "at once: EHOSTUNREACH on a TCP connect, EPERM on a UDP send",
        "names": "resolved at create; an address a name resolves to later is refused",
    });
    Ok(Plan {
        policy,
        launch: Network {
            stack: Some(pasta),
            nft: Some(nft),
            resolver: Some(RESOLVER.to_string()),
            ruleset,
            report: report.clone(),
        },
        report,
    })
}

/// Package managers' retry settings for a sandbox without network, set unless the call sets them: a
/// connection there fails at once, and retrying only delays the error (npm waited about a minute).
pub const NONE_ENV: [(&str, &str); 3] = [
    ("PIP_RETRIES", "0"),
    ("npm_config_fetch_retries", "0"),
    ("npm_config_fetch_timeout", "5000"),
];

/// Sets [`NONE_ENV`] when `network` (a sandbox's report) is `none`.
pub fn fail_fast_env(network: &Value, env: &mut std::collections::BTreeMap<String, String>) {
    if network["policy"] == "none" {
        for (k, v) in NONE_ENV {
            env.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
}

/// What a program's output says that the sandbox's network explains, if anything: a note for the result.
pub fn note(network: &Value, stdout: &str, stderr: &str) -> Option<String> {
    let said = |needles: &[&str]| {
        needles
            .iter()
            .any(|n| stderr.contains(n) || stdout.contains(n))
    };
    let pep668 = said(&["externally-managed-environment", "externally managed"]);
    let venv = "the system Python is externally managed (PEP 668): install with `pip install --target \
                /workspace/lib` (then PYTHONPATH=/workspace/lib) or into a venv (`python3 -m venv \
                /workspace/venv`)";
    match network["policy"].as_str() {
        Some("none") => {
            let unreachable = said(&[
                "Network is unreachable",
                "ENETUNREACH",
                "Temporary failure in name resolution",
                "Name or service not known",
                "Failed to resolve",
                "NewConnectionError",
                "getaddrinfo",
                "ENOTFOUND",
                "EAI_AGAIN",
                "Could not resolve host",
                "No matching distribution found",
            ]);
            (pep668 || unreachable).then(|| {
                format!(
                    "This sandbox has no network (network: none): nothing outside it is reachable and no \
                     name resolves, so package installs and downloads fail. Create a sandbox with \
                     network: \"egress\" (and network_allow naming the hosts, e.g. pypi.org:443, \
                     files.pythonhosted.org:443, registry.npmjs.org:443) to install packages{}.",
                    if pep668 { format!("; there, {venv}") } else { String::new() }
                )
            })
        }
        Some("egress") => {
            let refused = said(&["No route to host", "EHOSTUNREACH"]);
            let mut notes = Vec::new();
            if refused {
                notes.push(format!(
                    "Connections outside this sandbox's allow-list are refused at once (EHOSTUNREACH); \
                     it allows: {}. A new sandbox with another network_allow reaches more.",
                    network["allow"]
                ));
            }
            if pep668 {
                notes.push(format!("The network is there, but {venv}."));
            }
            (!notes.is_empty()).then(|| notes.join(" "))
        }
        _ => None,
    }
}

fn accept_rule(a: IpAddr, len: u8, ports: Option<(u16, u16)>) -> String {
    let fam = if a.is_ipv4() { "ip" } else { "ip6" };
    let ports = match ports {
        None => String::new(),
        Some((lo, hi)) if lo == hi => format!(" meta l4proto {{ tcp, udp }} th dport {lo}"),
        Some((lo, hi)) => format!(" meta l4proto {{ tcp, udp }} th dport {lo}-{hi}"),
    };
    format!("{fam} daddr {a}/{len}{ports} accept")
}

/// The nft script of an egress sandbox (one table, flushed first so a re-load cannot stack rules).
pub fn ruleset(accepts: &[String], anywhere: bool, host: &[IpAddr]) -> String {
    let mut r = String::from(
        "table inet sandbox\ndelete table inet sandbox\ntable inet sandbox {\n  chain output {\n    \
         type filter hook output priority 0; policy drop;\n    oifname \"lo\" accept\n    \
         ct state established,related accept\n",
    );
    r.push_str(&format!(
        "    ip daddr {RESOLVER} meta l4proto {{ tcp, udp }} th dport 53 accept\n"
    ));
    for a in accepts {
        r.push_str(&format!("    {a}\n"));
    }
    if anywhere {
        r.push_str(
            "    meta l4proto { tcp, udp } th dport 53 reject with icmpx type admin-prohibited\n",
        );
        for a in host {
            let fam = if a.is_ipv4() { "ip" } else { "ip6" };
            r.push_str(&format!(
                "    {fam} daddr {a} reject with icmpx type admin-prohibited\n"
            ));
        }
        // Link-local and loopback ranges name the host's side of pasta, never the outside.
        r.push_str("    ip daddr { 127.0.0.0/8, 169.254.0.0/16 } reject with icmpx type admin-prohibited\n");
        r.push_str("    ip6 daddr { ::1, fe80::/10 } reject with icmpx type admin-prohibited\n");
        r.push_str("    accept\n");
    }
    r.push_str("    reject with icmpx type admin-prohibited\n  }\n}\n");
    r
}

async fn resolve(name: &str) -> Result<Vec<IpAddr>, String> {
    let found = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tokio::net::lookup_host((name, 0)),
    )
    .await
    .map_err(|_| "no answer in 10 s".to_string())?
    .map_err(|e| e.to_string())?;
    let mut addrs: Vec<IpAddr> = found.map(|a| a.ip()).collect();
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        return Err("no address".into());
    }
    Ok(addrs)
}

/// The host's own addresses, every interface's (from /proc/net/fib_trie's LOCAL entries and
/// /proc/net/if_inet6): an egress sandbox reaches none of them unless the allow-list names it.
pub fn host_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    if let Ok(trie) = std::fs::read_to_string("/proc/net/fib_trie") {
        let mut last: Option<IpAddr> = None;
        for line in trie.lines() {
            let l = line.trim();
            if let Some(a) = l.strip_prefix("|-- ") {
                last = a.trim().parse().ok();
            } else if l.contains("/32 host LOCAL")
                && let Some(a) = last
            {
                out.push(a);
            }
        }
    }
    if let Ok(v6) = std::fs::read_to_string("/proc/net/if_inet6") {
        for line in v6.lines() {
            let Some(hex) = line.split_whitespace().next() else {
                continue;
            };
            if let Ok(n) = u128::from_str_radix(hex, 16) {
                out.push(IpAddr::V6(n.into()));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `name` as given when it holds a slash, else the first executable of that name in PATH or the sbin
/// directories (where Debian puts nft).
fn find_program(name: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.components().count() > 1 {
        return executable(name).then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> NetworkSettings {
        NetworkSettings {
            default: Policy::None,
            allow: Vec::new(),
            pasta: "pasta".into(),
            nft: "nft".into(),
        }
    }

    #[tokio::test]
    async fn egress_is_refused_off_the_namespace_backend_naming_the_field() {
        use crate::backend::BackendKind;
        for backend in [BackendKind::Microvm, BackendKind::Process] {
            let e = plan(&settings(), backend, Some("egress"), None)
                .await
                .expect_err("egress off the namespace backend");
            assert_eq!(e.code(), bridge_core::ErrorCode::InvalidArgument);
            assert!(e.message().contains("network"), "{}", e.message());
        }
        let none = plan(&settings(), BackendKind::Microvm, None, None)
            .await
            .expect("none is everywhere");
        assert_eq!(none.policy, Policy::None);
        assert_eq!(none.report["policy"], "none");
    }

    #[test]
    fn entries_parse_with_ports_and_prefixes() {
        let e = Entry::parse("pypi.org:443").expect("name:port");
        assert_eq!(e.target, Target::Name("pypi.org".into()));
        assert_eq!(e.ports, Some((443, 443)));
        let e = Entry::parse("10.1.2.3/8:80-90").expect("cidr:range");
        assert_eq!(e.target, Target::Net("10.0.0.0".parse().expect("ip"), 8));
        assert_eq!(e.ports, Some((80, 90)));
        let e = Entry::parse("[fd00::1]:53").expect("v6:port");
        assert_eq!(e.target, Target::Net("fd00::1".parse().expect("ip"), 128));
        let e = Entry::parse("fd00::/64").expect("v6 cidr");
        assert_eq!(e.target, Target::Net("fd00::".parse().expect("ip"), 64));
        for bad in [
            "",
            "a b",
            "10.0.0.0/33",
            "x.org:0",
            "x.org:9-1",
            "[::1",
            "1.2.3.4:http",
        ] {
            assert!(Entry::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_ruleset_allows_dns_to_the_resolver_and_refuses_the_rest() {
        let accepts = vec![accept_rule(
            "203.0.113.80".parse().expect("ip"),
            32,
            Some((443, 443)),
        )];
        let r = ruleset(&accepts, false, &[]);
        assert!(r.contains("ip daddr 169.254.0.53 meta l4proto { tcp, udp } th dport 53 accept"));
        assert!(
            r.contains("ip daddr 203.0.113.80/32 meta l4proto { tcp, udp } th dport 443 accept")
        );
        assert!(
            r.trim_end()
                .ends_with("reject with icmpx type admin-prohibited\n  }\n}")
        );
        assert!(!r.contains("    accept\n"));
        let open = ruleset(&[], true, &["192.0.2.2".parse().expect("ip")]);
        assert!(open.contains("ip daddr 192.0.2.2 reject"));
        assert!(open.contains("    accept\n"));
    }
}
