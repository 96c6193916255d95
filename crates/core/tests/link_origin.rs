#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The origin pattern syntax documented in `link::origin`.

use bridge_core::link::{LinkError, MissingOrigin, OriginPolicy};

fn policy(patterns: &[&str]) -> OriginPolicy {
    OriginPolicy::new(patterns, MissingOrigin::Reject).unwrap()
}

#[test]
fn any_port_wildcard() {
    let p = policy(&["http://localhost:*"]);
    assert!(p.allows(Some("http://localhost")));
    assert!(p.allows(Some("http://localhost:8000")));
    assert!(p.allows(Some("HTTP://LocalHost:8000")));
    assert!(!p.allows(Some("https://localhost:8000")));
    assert!(!p.allows(Some("http://localhost.evil.test")));
    assert!(!p.allows(Some("http://127.0.0.1:8000")));
}

#[test]
fn exact_and_default_ports() {
    let p = policy(&[
        "https://bitburner-official.github.io",
        "http://127.0.0.1:8080",
    ]);
    assert!(p.allows(Some("https://bitburner-official.github.io")));
    assert!(p.allows(Some("https://bitburner-official.github.io:443")));
    assert!(!p.allows(Some("https://bitburner-official.github.io:8443")));
    assert!(p.allows(Some("http://127.0.0.1:8080")));
    assert!(!p.allows(Some("http://127.0.0.1")));
    assert!(!p.allows(Some("http://127.0.0.1:8081")));
}

#[test]
fn subdomain_wildcard_excludes_the_bare_domain_and_lookalikes() {
    let p = policy(&["https://*.example"]);
    assert!(p.allows(Some("https://a.example")));
    assert!(p.allows(Some("https://a.b.example")));
    assert!(!p.allows(Some("https://example")));
    assert!(!p.allows(Some("https://badexample")));
    assert!(!p.allows(Some("http://a.example")));
    assert!(!p.allows(Some("https://a.example:8443")));
}

#[test]
fn whole_string_patterns_and_ipv6() {
    let p = policy(&["null", "file://", "http://[::1]:*"]);
    assert!(p.allows(Some("null")));
    assert!(p.allows(Some("file://")));
    assert!(p.allows(Some("http://[::1]:3000")));
    assert!(!p.allows(Some("http://[::2]:3000")));
    assert!(!p.allows(Some("https://x.test")));
}

#[test]
fn missing_origin_is_its_own_choice() {
    assert!(!policy(&["*"]).allows(None));
    assert!(policy(&["*"]).allows(Some("https://anything.test")));
    let p = OriginPolicy::new(Vec::<String>::new(), MissingOrigin::Accept).unwrap();
    assert!(p.allows(None));
    assert!(!p.allows(Some("http://localhost")));
    assert!(OriginPolicy::any().allows(None));
}

#[test]
fn localhost_preset() {
    let p = OriginPolicy::localhost(MissingOrigin::Accept);
    for o in [
        "http://localhost",
        "http://localhost:8000",
        "https://127.0.0.1:1",
        "http://[::1]:9",
    ] {
        assert!(p.allows(Some(o)), "{o}");
    }
    assert!(!p.allows(Some("http://evil.test")));
    assert!(p.allows(None));
}

#[test]
fn bad_patterns_are_rejected_with_the_pattern_named() {
    for bad in [
        "",
        "http://a/b",
        "http://lo*calhost",
        "http://localhost:port",
        "*://x",
        "http://*.",
    ] {
        match OriginPolicy::new([bad], MissingOrigin::Reject) {
            Err(LinkError::InvalidOriginPattern { pattern, .. }) => assert_eq!(pattern, bad),
            other => panic!("{bad:?} should be rejected, got {other:?}"),
        }
    }
}
