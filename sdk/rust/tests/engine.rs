//! The engine against real RS256 tokens and a loopback JWKS.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{claims, engine, idp, now};
use serde_json::json;
use svc::TokenDecision;

#[test]
fn a_valid_token_is_allowed_with_its_claims() {
    let e = engine("valid");
    let tok = idp().token("user-1", "acme", &["viewer"]);
    let d = e.validate_token(&tok).unwrap();
    assert!(d.allowed, "{d:?}");
    assert_eq!(d.reason, "ok");
    assert_eq!(d.subject.as_deref(), Some("user-1"));
    assert_eq!(d.tenant_id.as_deref(), Some("acme"));
    assert_eq!(d.claims["department"], "sales");
    assert_eq!(d.claims["roles"], json!(["viewer"]));
    // Cached: the same answer again, a decision of its own.
    let again = e.validate_token(&tok).unwrap();
    assert!(d.decision_id.is_some() && again.decision_id.is_some() && again.decision_id != d.decision_id, "{again:?}");
    assert_eq!(TokenDecision { decision_id: d.decision_id.clone(), ..again }, d);
}

#[test]
fn answers_larger_than_the_buffer_come_back_whole() {
    let e = engine("big");
    let mut c = claims("user-1", "acme", &["viewer"]);
    let blob = "x".repeat(20_000); // past the 4 KiB answer buffer
    c["blob"] = json!(blob);
    let tok = idp().sign(&c);
    for _ in 0..2 {
        let d = e.validate_token(&tok).unwrap();
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.claims["blob"].as_str().map(str::len), Some(20_000));
        let p = e.authorize(&tok, &json!({"action": "orders:read"})).unwrap();
        assert_eq!(p.token.claims["blob"].as_str().map(str::len), Some(20_000));
    }
}

#[test]
fn claims_are_read_whatever_the_strings_hold() {
    let e = engine("tricky");
    let sub = r#"x","claims":{"forged":true},"y":""#;
    let mut c = claims(sub, "acme", &["viewer"]);
    c["note"] = json!(",\"claims\":null}");
    let tok = idp().sign(&c);
    for _ in 0..2 {
        // parsed, then from the engine's parsed claims
        let d = e.validate_token(&tok).unwrap();
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.subject.as_deref(), Some(sub));
        assert_eq!(d.claims["sub"], json!(sub));
        assert_eq!(d.claims["note"], c["note"]);
        assert!(d.claims.get("forged").is_none());
    }
}

#[test]
fn refused_tokens_carry_their_reason() {
    let e = engine("refused");
    let mut expired = claims("user-1", "acme", &["viewer"]);
    expired["exp"] = json!(now() - 3600);
    expired["iat"] = json!(now() - 7200);
    let good = idp().token("user-1", "acme", &["viewer"]);
    let mut forged = good.clone();
    forged.truncate(good.len() - 4);
    forged.push_str("AAAA");
    let cases = [
        (idp().sign(&expired), "token-expired"),
        (forged, "signature-invalid"),
        ("not-a-jwt".to_string(), "token-malformed"),
        (idp().token("user-1", "globex", &["viewer"]), "tenant-mismatch"),
    ];
    for (tok, want) in cases {
        let d = e.validate_token(&tok).unwrap();
        assert!(!d.allowed, "{want}: {d:?}");
        assert_eq!(d.reason, want);
        assert!(d.claims.is_null());
        let msg = d.message.unwrap_or_default();
        assert!(!msg.contains(&tok), "the message holds the token: {msg}");
    }
}

#[test]
fn authorize_evaluates_the_default_policy() {
    let e = engine("authorize");
    let tok = idp().token("user-1", "acme", &["viewer"]);
    let p = e.authorize(&tok, &json!({"action": "orders:read"})).unwrap();
    assert!(p.allowed, "{p:?}");
    assert_eq!(p.reason, "policy-allow");
    assert!(p.deny_reasons.is_empty());
    assert!(!p.decision_id.is_empty());
    assert_eq!(p.token.subject.as_deref(), Some("user-1"));

    let p = e.authorize(&tok, &json!({"action": "orders:delete"})).unwrap();
    assert!(!p.allowed);
    assert_eq!(p.reason, "policy-deny");
    assert_eq!(
        p.deny_reasons,
        vec!["role-forbidden: viewer cannot orders:delete".to_string()]
    );

    let p = e.authorize("garbage", &json!({"action": "orders:read"})).unwrap();
    assert!(!p.allowed);
    assert_eq!(p.reason, "token-malformed");
    assert!(!p.decision_id.is_empty(), "a refused token's decision has an id too");

    let err = e.authorize(&tok, &json!({"action": 5})).unwrap_err();
    assert_eq!(err.reason(), "input-invalid", "{err}");
}

#[test]
fn decisions_reach_the_audit_log_by_drop() {
    let path = common::config_file("audit", common::UNLIMITED);
    let tok = idp().token("user-7", "acme", &["viewer"]);
    let e = svc::Engine::from_config_file(&path).unwrap();
    let p = e.authorize(&tok, &json!({"action": "orders:read"})).unwrap();
    drop(e); // flushes the audit log
    let log = std::fs::read_to_string(path.with_file_name("audit.log")).unwrap();
    let rec: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(rec["decision_id"], json!(p.decision_id));
    assert_eq!(rec["user_id"], "user-7");
    assert_eq!(rec["reason"], "policy-allow");
    assert!(!log.contains(&tok), "the audit log holds the token");
}

#[test]
fn the_tenant_rate_limit_applies() {
    let e =
        svc::Engine::from_config_file(common::config_file("ratelimit", "\n[rate_limit]\ndefault_rpm = 3\n")).unwrap();
    let tok = idp().token("user-1", "acme", &["viewer"]);
    for _ in 0..3 {
        assert!(e.validate_token(&tok).unwrap().allowed);
    }
    let d = e.validate_token(&tok).unwrap();
    assert!(!d.allowed);
    assert_eq!(d.reason, "rate-limited");

    // A policy decision says how long to wait: a third of a minute at
    // three a minute, less what has refilled since.
    let p = e.authorize(&tok, &json!({"action": "orders:read"})).unwrap();
    assert!(!p.allowed);
    assert_eq!(p.reason, "rate-limited");
    let wait = p.retry_after.expect("a rate-limited decision's wait");
    assert!(
        wait > Duration::from_secs(10) && wait <= Duration::from_secs(20),
        "retry_after {wait:?}"
    );
    let allowed = engine("ratelimit-none")
        .authorize(&tok, &json!({"action": "orders:read"}))
        .unwrap();
    assert!(allowed.allowed && allowed.retry_after.is_none(), "{allowed:?}");
}

#[test]
fn many_threads_share_one_engine() {
    let e = engine("threads");
    let toks: Arc<Vec<String>> = Arc::new(
        (0..8)
            .map(|i| idp().token(&format!("user-{i}"), "acme", &["viewer"]))
            .collect(),
    );
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let e = e.clone();
            let toks = toks.clone();
            thread::spawn(move || {
                for i in 0..500 {
                    let k = (t + i) % toks.len();
                    let d = e.validate_token(&toks[k]).unwrap();
                    assert!(d.allowed);
                    assert_eq!(d.subject, Some(format!("user-{k}")));
                    if i % 50 == 0 {
                        let p = e.authorize(&toks[k], &json!({"action": "orders:read"})).unwrap();
                        assert!(p.allowed, "{p:?}");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn engines_created_and_dropped_do_not_leak() {
    let path = common::config_file("leak", "");
    let tok = idp().token("user-1", "acme", &["viewer"]);
    let cycle = || {
        let e = svc::Engine::from_config_file(&path).unwrap();
        assert!(e.validate_token(&tok).unwrap().allowed);
        assert!(e.authorize(&tok, &json!({"action": "orders:read"})).unwrap().allowed);
    };
    for _ in 0..20 {
        cycle();
    }
    let before = common::rss_bytes();
    let n = 150;
    for _ in 0..n {
        cycle();
    }
    let after = common::rss_bytes();
    let grown = after.saturating_sub(before);
    eprintln!("rss before {} MiB, after {n} engines {} MiB", before >> 20, after >> 20);
    assert!(grown < 40 << 20, "RSS grew by {} MiB over {n} engines", grown >> 20);
}

#[test]
fn a_policy_reads_resource_attributes() {
    let dir = std::env::temp_dir().join(format!("svc-rs-attrs-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("authz.rego"),
        "package svc.authz\n\ndefault allow := false\n\nallow if input.resource.attributes.owner == input.user.id\n\ndeny_reasons := set() if allow\nelse := {\"not-owner\"}\n",
    )
    .unwrap();
    let extra = format!("{}\n[policy]\ndir = {:?}\n", common::UNLIMITED, dir.display().to_string());
    let e = svc::Engine::from_config_file(common::config_file("attributes", &extra)).expect("engine");
    let tok = idp().token("user-1", "acme", &["viewer"]);
    let input = |owner: &str| {
        json!({"action": "orders:update", "resource": {"id": "o-1", "attributes": {"owner": owner, "status": "open"}}})
    };
    let p = e.authorize(&tok, &input("user-1")).unwrap();
    assert!(p.allowed, "{p:?}");
    let p = e.authorize(&tok, &input("user-2")).unwrap();
    assert!(!p.allowed);
    assert_eq!(p.deny_reasons, vec!["not-owner".to_string()]);
}
