//! Single sign-on: JWTs of an OIDC issuer served on 127.0.0.1 by this test (discovery document
//! and JWKS, keys made here with ring), verified by the server beside its own tokens. Roles come
//! from the groups claim through the server's mappings; every way a token can be wrong is a 401
//! naming why; a rotated key is fetched once; no token reaches the logs or the audit log.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use common::{Files, assert_problem, call, wait_for, write_stack};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use kusion_server::oidc::{OidcConfig, OidcVerifier};
use kusion_server::{AppState, InProcessQueue};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use serde_json::{Value, json};

/// An issuer's published keys, changeable while the test runs, and how often they were read.
#[derive(Clone, Default)]
struct Issuer {
    url: Arc<Mutex<String>>,
    discovered_issuer: Arc<Mutex<Option<String>>>,
    keys: Arc<Mutex<Vec<Value>>>,
    jwks_reads: Arc<AtomicUsize>,
}

async fn discovery(State(issuer): State<Issuer>) -> Json<Value> {
    let url = issuer.url.lock().unwrap().clone();
    let named = issuer
        .discovered_issuer
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_else(|| url.clone());
    Json(json!({"issuer": named, "jwks_uri": format!("{url}/keys")}))
}

async fn jwks(State(issuer): State<Issuer>) -> Json<Value> {
    issuer.jwks_reads.fetch_add(1, Ordering::SeqCst);
    Json(json!({"keys": *issuer.keys.lock().unwrap()}))
}

async fn start_issuer(path: &str) -> (Issuer, String) {
    let issuer = Issuer::default();
    let app = axum::Router::new()
        .route(
            &format!("{path}/.well-known/openid-configuration"),
            get(discovery),
        )
        .route(&format!("{path}/keys"), get(jwks))
        .with_state(issuer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let url = format!("http://{address}{path}");
    *issuer.url.lock().unwrap() = url.clone();
    (issuer, url)
}

/// A signing key: its private half for jsonwebtoken and its public JWK.
struct Signer {
    kid: String,
    alg: Algorithm,
    private: EncodingKey,
    jwk: Value,
}

fn p256(kid: &str) -> Signer {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    // An uncompressed point: 0x04, x, y.
    let point = pair.public_key().as_ref();
    Signer {
        kid: kid.into(),
        alg: Algorithm::ES256,
        private: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({
            "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
            "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65]),
        }),
    }
}

fn ed25519(kid: &str) -> Signer {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    Signer {
        kid: kid.into(),
        alg: Algorithm::EdDSA,
        private: EncodingKey::from_ed_der(pkcs8.as_ref()),
        jwk: json!({
            "kty": "OKP", "crv": "Ed25519", "kid": kid,
            "x": B64.encode(pair.public_key().as_ref()),
        }),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn sign(signer: &Signer, claims: &Value) -> String {
    let mut header = Header::new(signer.alg);
    header.kid = Some(signer.kid.clone());
    jsonwebtoken::encode(&header, claims, &signer.private).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issuer_jwts_authenticate_map_groups_to_roles_and_refuse_every_forgery() {
    let logs = common::capture_logs();

    let (issuer, issuer_url) = start_issuer("/realms/ops").await;
    let es = p256("es-1");
    let ed = ed25519("ed-1");
    *issuer.keys.lock().unwrap() = vec![
        es.jwk.clone(),
        ed.jwk.clone(),
        // Kinds the server skips rather than trusts: a shared secret, and an encryption key.
        json!({"kty": "oct", "kid": "hmac", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQ"}),
        json!({"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc",
               "x": es.jwk["x"], "y": es.jwk["y"]}),
    ];

    // A discovery document naming another issuer, and an issuer nobody serves: the server
    // does not start.
    *issuer.discovered_issuer.lock().unwrap() = Some("https://elsewhere.example".into());
    let refused = OidcVerifier::discover(OidcConfig::new(&issuer_url, "kusion")).await;
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("elsewhere.example")),
        "{:?}",
        refused.err()
    );
    *issuer.discovered_issuer.lock().unwrap() = None;
    let nobody = OidcVerifier::discover(OidcConfig::new("http://127.0.0.1:9/none", "kusion")).await;
    assert!(nobody.is_err());

    let mut config = OidcConfig::new(&issuer_url, "kusion");
    config.roles = [
        "sre=*:viewer",
        "shop-ops=shop:operator",
        "shop-leads=shop:approver",
    ]
    .iter()
    .map(|m| m.parse().unwrap())
    .collect();
    let verifier = OidcVerifier::discover(config).await.unwrap();
    let reads_after_start = issuer.jwks_reads.load(Ordering::SeqCst);

    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "shop");
    let source = Arc::new(Files::new(root.clone(), work.path().join("cloud")));
    let queue = Arc::new(InProcessQueue::default());
    let state = AppState::open_with_oidc(
        &work.path().join("data"),
        source.clone(),
        queue.clone(),
        None,
        Duration::from_secs(2),
        Some(verifier),
    )
    .unwrap();
    tokio::spawn(kusion_server::worker::run(
        queue.clone(),
        source.clone(),
        "w".into(),
    ));
    let app = kusion_server::api::router(state.clone());

    let claims = |sub: &str, groups: &[&str]| {
        json!({
            "iss": issuer_url, "aud": ["kusion", "other-client"], "sub": sub,
            "groups": groups, "iat": now(), "exp": now() + 300,
            "jti": format!("jti-{sub}"),
        })
    };
    let alice = sign(&es, &claims("alice", &["shop-ops", "unmapped"]));
    let bob = sign(&ed, &claims("bob", &["shop-leads"]));
    let vera = sign(&es, &claims("vera", &["sre"]));
    let nobody = sign(&es, &claims("nobody", &[]));
    let mut used = vec![alice.clone(), bob.clone(), vera.clone(), nobody.clone()];

    // An operator starts an apply needing approval; a viewer may read but not act; a caller in
    // no mapped group may do nothing; the approver approves.
    let r = call(&app, "GET", "/api/v1/projects", Some(&vera), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = call(
        &app,
        "GET",
        "/api/v1/projects/shop/stacks/dev",
        Some(&nobody),
        None,
    )
    .await;
    assert!(
        matches!(r.status, StatusCode::FORBIDDEN | StatusCode::NOT_FOUND),
        "{}: {}",
        r.status,
        r.body
    );
    let start = r#"{"kind":"apply"}"#;
    let path = "/api/v1/projects/shop/stacks/dev/operations";
    let r = call(&app, "POST", path, Some(&vera), Some(start)).await;
    assert_problem(&r, StatusCode::FORBIDDEN, "a viewer group applying");
    let r = call(&app, "POST", path, Some(&alice), Some(start)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let op = r.body["id"].as_str().unwrap().to_string();
    wait_for(&app, &alice, &op, "awaiting_approval").await;
    let approve = format!("/api/v1/operations/{op}/approve");
    let r = call(&app, "POST", &approve, Some(&alice), Some("{}")).await;
    assert_eq!(
        r.status,
        StatusCode::FORBIDDEN,
        "an operator does not approve: {}",
        r.body
    );
    let r = call(&app, "POST", &approve, Some(&bob), Some("{}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let done = wait_for(&app, &alice, &op, "succeeded").await;
    assert_eq!(done["requestedBy"], "alice", "{done}");
    assert_eq!(done["approvedBy"], "bob", "{done}");

    // Every way a token can be wrong is a 401 that says why.
    let bad = |claims: Value| sign(&es, &claims);
    let mut expired = claims("alice", &["shop-ops"]);
    expired["exp"] = json!(now() - 3600);
    let mut early = claims("alice", &["shop-ops"]);
    early["nbf"] = json!(now() + 3600);
    let mut foreign_audience = claims("alice", &["shop-ops"]);
    foreign_audience["aud"] = json!("another-app");
    let mut foreign_issuer = claims("alice", &["shop-ops"]);
    foreign_issuer["iss"] = json!("https://elsewhere.example");
    let mut no_expiry = claims("alice", &["shop-ops"]);
    no_expiry.as_object_mut().unwrap().remove("exp");
    let mut no_subject = claims("alice", &["shop-ops"]);
    no_subject.as_object_mut().unwrap().remove("sub");
    let stranger = p256("es-1"); // the issuer's key ID, another key
    let mut confused = Header::new(Algorithm::HS256);
    confused.kid = Some("es-1".into());
    let public_as_secret = serde_json::to_vec(&es.jwk).unwrap();
    let unsigned = format!(
        "{}.{}.",
        B64.encode(br#"{"alg":"none","typ":"JWT"}"#),
        B64.encode(claims("alice", &["shop-ops"]).to_string())
    );
    let tampered = {
        let mut parts: Vec<String> = alice.split('.').map(str::to_string).collect();
        let mut body: Value = serde_json::from_slice(&B64.decode(&parts[1]).unwrap()).unwrap();
        body["groups"] = json!(["shop-leads"]);
        parts[1] = B64.encode(body.to_string());
        parts.join(".")
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("expired", bad(expired), "expired"),
        ("not yet valid", bad(early), "not valid yet"),
        ("another audience", bad(foreign_audience), "audience"),
        ("another issuer", bad(foreign_issuer), "issuer"),
        ("no exp", bad(no_expiry), "exp"),
        ("no subject", bad(no_subject), "subject"),
        (
            "another key under the issuer's key ID",
            sign(&stranger, &claims("alice", &["shop-ops"])),
            "signature",
        ),
        (
            "HS256 keyed with the public key",
            jsonwebtoken::encode(
                &confused,
                &claims("alice", &["shop-leads"]),
                &EncodingKey::from_secret(&public_as_secret),
            )
            .unwrap(),
            "HS256",
        ),
        ("alg none", unsigned, "not a JWT"),
        ("claims edited after signing", tampered, "signature"),
        ("not a JWT", "a.b.c".to_string(), "not a JWT"),
    ];
    for (what, token, why) in cases {
        let r = call(&app, "GET", "/api/v1/projects", Some(&token), None).await;
        assert_problem(&r, StatusCode::UNAUTHORIZED, what);
        let detail = r.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(why), "{what}: {detail}");
        used.push(token);
    }

    // A key the issuer adds later is fetched once, when a token first names it; key IDs nobody
    // published do not make the server fetch again within the interval.
    let rotated = ed25519("ed-2");
    issuer.keys.lock().unwrap().push(rotated.jwk.clone());
    let carol = sign(&rotated, &claims("carol", &["sre"]));
    let r = call(&app, "GET", "/api/v1/projects", Some(&carol), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let reads = issuer.jwks_reads.load(Ordering::SeqCst);
    assert_eq!(
        reads,
        reads_after_start + 1,
        "the rotated key was fetched once"
    );
    for n in 0..5 {
        let forged = sign(
            &ed25519(&format!("forged-{n}")),
            &claims("mallory", &["sre"]),
        );
        let r = call(&app, "GET", "/api/v1/projects", Some(&forged), None).await;
        assert_problem(&r, StatusCode::UNAUTHORIZED, "an unpublished key ID");
        used.push(forged);
    }
    assert_eq!(issuer.jwks_reads.load(Ordering::SeqCst), reads);
    used.push(carol);

    // The audit log names the JWT by its ID and the subject, never the token.
    let admin = state
        .tokens
        .mint(
            "root",
            [("*".to_string(), kusion_server::auth::Role::Admin)].into(),
            None,
        )
        .unwrap()
        .token;
    let r = call(&app, "GET", "/api/v1/audit", Some(&admin), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let audit = r.body.to_string();
    assert!(audit.contains("oidc:jti-bob"), "{audit}");
    let logs = logs.text();
    let audit_file = std::fs::read_to_string(work.path().join("data/audit.jsonl")).unwrap();
    for token in &used {
        let signature = token.rsplit('.').next().unwrap();
        for (name, text) in [("logs", &logs), ("audit log", &audit_file)] {
            assert!(
                signature.len() < 8 || !text.contains(signature),
                "a token reached the {name}"
            );
        }
    }
}
