//! Tokens and the audit log in PostgreSQL (kusion-pg-harness), shared by the servers on one
//! queue: a token minted through server A verifies on server B and is refused on B soon after
//! A revokes it (the cache is dropped by `NOTIFY`, and trusted for `TOKEN_CACHE_TTL` at most);
//! expired tokens are refused; the audit entries of both servers land in one table in order,
//! with no token text; the audit table needs no UPDATE or DELETE from the server's role; and a
//! revocation whose notification is lost still takes effect within the cache's bound.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{Files, call, write_stack};
use kusion_pg_harness::PgServer;
use kusion_server::audit::AuditLog;
use kusion_server::auth::{PgTokens, Role, TOKEN_CACHE_TTL, TokenStore};
use kusion_server::pgconn::PgPool;
use kusion_server::{AppState, OperationQueue, PostgresQueue, QueueOptions};

fn pg() -> PgServer {
    PgServer::start().unwrap_or_else(|e| panic!("PostgreSQL must start: {e}"))
}

/// One server's state on the shared PostgreSQL: its own pool (as its own process would have).
fn server(url: &str, source: Arc<Files>) -> Arc<AppState> {
    let queue = PostgresQueue::connect(
        url,
        QueueOptions {
            connections: 2,
            ..QueueOptions::default()
        },
    )
    .unwrap();
    let pool = queue.pool();
    let queue: Arc<dyn OperationQueue> = Arc::new(queue);
    AppState::with_stores(
        TokenStore::Postgres(PgTokens::open(pool.clone(), TOKEN_CACHE_TTL).unwrap()),
        AuditLog::postgres(pool).unwrap(),
        source,
        queue,
        None,
        Duration::from_secs(2),
        None,
    )
}

fn admin_scopes() -> BTreeMap<String, Role> {
    BTreeMap::from([("*".to_string(), Role::Admin)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_minted_on_one_server_verify_and_are_revoked_on_another() {
    let pg = pg();
    let url = pg.url();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "shop");
    let source = Arc::new(Files::new(root, work.path().join("cloud")));
    let a = server(&url, source.clone());
    let b = server(&url, source);
    let (app_a, app_b) = (
        kusion_server::api::router(a.clone()),
        kusion_server::api::router(b.clone()),
    );
    let root_token = a.tokens.mint("root", admin_scopes(), None).unwrap().token;

    // Minted through A's API: B knows it at once (unknown tokens are never cached).
    let r = call(
        &app_a,
        "POST",
        "/api/v1/tokens",
        Some(&root_token),
        Some(r#"{"subject": "alice", "scopes": {"shop": "viewer"}}"#),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let alice = r.body["token"].as_str().unwrap().to_string();
    let alice_id = r.body["id"].as_str().unwrap().to_string();
    let r = call(&app_b, "GET", "/api/v1/projects", Some(&alice), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // Once the mint's notification has passed, B keeps the token in its cache (5 s): what
    // refuses it below within milliseconds is the revocation's notification.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = call(&app_b, "GET", "/api/v1/projects", Some(&alice), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = call(&app_b, "GET", "/api/v1/projects", Some(&alice), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let listed = call(&app_b, "GET", "/api/v1/tokens", Some(&root_token), None).await;
    assert_eq!(listed.body.as_array().unwrap().len(), 2, "{}", listed.body);
    assert!(!listed.body.to_string().contains(&alice));

    // Revoked through A: refused on B within the cache's bound (NOTIFY makes it much sooner).
    let r = call(
        &app_a,
        "DELETE",
        &format!("/api/v1/tokens/{alice_id}"),
        Some(&root_token),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let revoked = Instant::now();
    loop {
        let r = call(&app_b, "GET", "/api/v1/projects", Some(&alice), None).await;
        if r.status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            revoked.elapsed() < TOKEN_CACHE_TTL + Duration::from_millis(500),
            "still accepted on B {:?} after the revocation",
            revoked.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = revoked.elapsed();
    eprintln!("revocation reached server B after {took:?}");
    assert!(
        took < Duration::from_secs(2),
        "the notification should beat the TTL: {took:?}"
    );

    // Expired tokens are refused on both (the cache checks the expiry too).
    let short = a
        .tokens
        .mint("brief", admin_scopes(), Some(Duration::from_millis(300)))
        .unwrap()
        .token;
    assert!(b.tokens.verify(&short).is_some());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(b.tokens.verify(&short).is_none(), "expired, though cached");
    assert!(a.tokens.verify(&short).is_none());
    let expired = a
        .tokens
        .mint("eve", admin_scopes(), Some(Duration::ZERO))
        .unwrap()
        .token;
    let r = call(&app_b, "GET", "/api/v1/projects", Some(&expired), None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);

    // Revoking by subject (what a start-up admin token's server does) spares other subjects.
    let b1 = b
        .tokens
        .mint("bootstrap-admin@h-1", admin_scopes(), None)
        .unwrap();
    let b2 = a
        .tokens
        .mint("bootstrap-admin@h-2", admin_scopes(), None)
        .unwrap();
    assert_eq!(a.tokens.revoke_subject("bootstrap-admin@h-1").unwrap(), 1);
    assert!(a.tokens.verify(&b1.token).is_none());
    assert!(b.tokens.verify(&b2.token).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_entries_of_both_servers_share_one_append_only_table() {
    let pg = pg();
    let url = pg.url();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("konfig");
    write_stack(&root, "shop");
    let source = Arc::new(Files::new(root, work.path().join("cloud")));
    let a = server(&url, source.clone());
    let b = server(&url, source);
    let (app_a, app_b) = (
        kusion_server::api::router(a.clone()),
        kusion_server::api::router(b.clone()),
    );
    let root_token = a.tokens.mint("root", admin_scopes(), None).unwrap().token;
    let mut minted = Vec::new();
    for (n, app) in [&app_a, &app_b, &app_a, &app_b].into_iter().enumerate() {
        let r = call(
            app,
            "POST",
            "/api/v1/tokens",
            Some(&root_token),
            Some(&format!(
                r#"{{"subject": "user{n}", "scopes": {{"shop": "viewer"}}}}"#
            )),
        )
        .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        minted.push(r.body["token"].as_str().unwrap().to_string());
    }
    // A refused call is audited too.
    let r = call(
        &app_b,
        "POST",
        "/api/v1/tokens",
        Some("kusion_nope"),
        Some("{}"),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);

    for app in [&app_a, &app_b] {
        let r = call(app, "GET", "/api/v1/audit", Some(&root_token), None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let entries = r.body.as_array().unwrap();
        let results: Vec<(&str, u64)> = entries
            .iter()
            .map(|e| (e["result"].as_str().unwrap(), e["status"].as_u64().unwrap()))
            .collect();
        assert_eq!(
            results,
            [
                ("ok", 201),
                ("ok", 201),
                ("ok", 201),
                ("ok", 201),
                ("denied", 401)
            ],
            "{}",
            r.body
        );
        assert!(entries.iter().take(4).all(|e| e["subject"] == "root"));
        let text = r.body.to_string();
        for token in minted.iter().chain([&root_token]) {
            assert!(!text.contains(token.as_str()), "a token in the audit log");
        }
        assert!(!text.contains("kusion_nope"));
    }

    // A role with INSERT and SELECT only (no UPDATE or DELETE) on the audit table is enough.
    // (The synchronous client runs its own runtime: off the test's.)
    std::thread::spawn(move || app_role_can_only_append(&url))
        .join()
        .unwrap();
}

fn app_role_can_only_append(url: &str) {
    let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "CREATE ROLE kusion_app LOGIN;
             GRANT USAGE, CREATE ON SCHEMA public TO kusion_app;
             GRANT INSERT, SELECT ON kusion_audit TO kusion_app;
             GRANT USAGE ON SEQUENCE kusion_audit_seq_seq TO kusion_app;",
        )
        .unwrap();
    let app_url = url.replacen("kusion@", "kusion_app@", 1);
    let log = AuditLog::postgres(Arc::new(PgPool::connect(&app_url, 1).unwrap())).unwrap();
    let mut entry = log.read().unwrap()[0].clone();
    entry.target = "/by-the-app-role".into();
    log.record(&entry).unwrap();
    assert_eq!(log.read().unwrap().len(), 6);
    assert_eq!(log.read().unwrap()[5].target, "/by-the-app-role");
    let mut app = postgres::Client::connect(&app_url, postgres::NoTls).unwrap();
    let update = app.execute("UPDATE kusion_audit SET body = '{}'", &[]);
    assert!(update.is_err(), "the app role cannot rewrite the log");
    let delete = app.execute("DELETE FROM kusion_audit", &[]);
    assert!(delete.is_err(), "nor delete from it");
}

/// Without the notification (revoked behind the servers' backs, as if it were lost with the
/// listening connection), a cached token is still refused once the cache's bound has passed.
#[test]
fn a_lost_notification_is_bounded_by_the_cache_ttl() {
    let pg = pg();
    let url = pg.url();
    let ttl = Duration::from_secs(1);
    let store = || {
        let pool = Arc::new(PgPool::connect(&url, 1).unwrap());
        TokenStore::Postgres(PgTokens::open(pool, ttl).unwrap())
    };
    let (a, b) = (store(), store());
    let carol = a.mint("carol", admin_scopes(), None).unwrap().token;
    // The mint's own notification (and the listeners' first connection) drop the caches: let
    // them arrive, then cache the token on B.
    std::thread::sleep(Duration::from_millis(300));
    assert!(b.verify(&carol).is_some());
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    assert_eq!(
        db.execute("DELETE FROM kusion_token WHERE subject = 'carol'", &[])
            .unwrap(),
        1
    );
    let deleted = Instant::now();
    // Served from B's cache: no notification came.
    assert!(b.verify(&carol).is_some(), "cached");
    while b.verify(&carol).is_some() {
        assert!(
            deleted.elapsed() < ttl + Duration::from_millis(300),
            "still accepted {:?} after the deletion",
            deleted.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("refused {:?} after a silent deletion", deleted.elapsed());
    assert!(a.verify(&carol).is_none());
}
