//! `kusionctl server` end to end over HTTP (the testbed build with the fake-cloud runtime): a
//! Konfig stack that requires approval is listed, compiled and previewed; an apply plans and
//! waits; a second person approves; its progress streams as Server-Sent Events; the release it
//! records is the one `kusionctl apply` records for the same stack. Tokens appear nowhere but
//! where they were printed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kusion_kernel::state::{LocalStore, Release, StateStore};
use kusion_tests::api_server::{ApiServer, agent};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");

const MAIN_K: &str = r#"resources = [
    {
        id = "t:web"
        type = "Test"
        attributes = {size = 1, stack = option("stack")}
    }
    {
        id = "t:db"
        type = "Test"
        attributes = {size = 2}
        dependsOn = ["t:web"]
    }
]
"#;

/// `ROOT/kcl.mod`, project `inv`, stack `inv/dev` requiring approval.
fn layout(root: &Path) -> PathBuf {
    let stack = root.join("inv/dev");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"served\"\n").unwrap();
    std::fs::write(root.join("inv/project.yaml"), "name: inv\n").unwrap();
    std::fs::write(
        stack.join("stack.yaml"),
        "name: dev\nrequireApproval: true\n",
    )
    .unwrap();
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(stack.join("main.k"), MAIN_K).unwrap();
    stack
}

fn command(dir: &Path, home: &Path, cloud: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir)
        .env("HOME", home)
        .env("KUSION_TEST_CLOUD", cloud)
        .env_remove("KUSION_STATE_DIR")
        .env_remove("KUSION_CONFIG")
        .env_remove("KUSION_RUNTIME_CONFIG")
        .env_remove("KUSION_PLUGIN_PATH")
        .stdin(Stdio::null());
    c
}

/// Starts `kusionctl server` with no configuration but a free port, and reads its banner.
fn start(root: &Path, home: &Path, cloud: &Path, log: &Path) -> ApiServer {
    let mut command = command(root, home, cloud);
    command.args(["server", "--listen", "127.0.0.1:0", "-vv"]);
    ApiServer::start(command, log)
}

/// The fake cloud's objects by file name, without the `uid` it generates from the clock.
fn cloud_objects(dir: &Path) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let text = std::fs::read_to_string(e.path()).unwrap();
            // `creations.log` lists each creation once: sorted, as the two runs may interleave.
            let mut object = serde_json::from_str(&text).unwrap_or_else(|_| {
                let mut lines: Vec<&str> = text.lines().collect();
                lines.sort();
                json!(lines)
            });
            strip_uid(&mut object);
            (e.file_name().to_string_lossy().into_owned(), object)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn strip_uid(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("uid");
            m.values_mut().for_each(strip_uid);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_uid),
        _ => {}
    }
}

#[test]
fn preview_approve_apply_watch_over_http_records_the_release_the_cli_records() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let root = work.join("served");
    let stack = layout(&root);
    let log = work.join("server.log");
    let server = start(&root, &home, &work.join("cloud-server"), &log);
    let admin = server.admin.clone();

    let (code, health) = agent()
        .get(format!("{}/healthz", server.base))
        .call()
        .map(|mut r| {
            (
                r.status().as_u16(),
                r.body_mut().read_to_string().unwrap_or_default(),
            )
        })
        .unwrap();
    assert_eq!((code, health.contains("ok")), (200, true));
    let (code, _) = server.call("GET", "/api/v1/projects", "kusion_wrong", None);
    assert_eq!(code, 401);

    let mint = |subject: &str, role: &str| server.mint(&admin, subject, json!({"inv": role}));
    let alice = mint("alice", "operator");
    let bob = mint("bob", "approver");

    let (code, projects) = server.call("GET", "/api/v1/projects", &alice, None);
    assert_eq!(code, 200, "{projects}");
    assert_eq!(projects[0]["name"], "inv", "{projects}");
    assert_eq!(projects[0]["stacks"][0]["stack"], "dev");
    assert_eq!(projects[0]["stacks"][0]["requireApproval"], true);
    let (code, spec) = server.call("GET", "/api/v1/projects/inv/stacks/dev/spec", &alice, None);
    assert_eq!(code, 200, "{spec}");
    assert_eq!(
        spec["resources"][0]["attributes"]["stack"], "dev",
        "compiled with the stack's options: {spec}"
    );

    // Preview.
    let ops = "/api/v1/projects/inv/stacks/dev/operations";
    let (code, op) = server.call("POST", ops, &alice, Some(json!({"kind": "preview"})));
    assert_eq!(code, 202, "{op}");
    let preview = server.wait_for(&alice, op["id"].as_str().unwrap(), "succeeded");
    assert_eq!(preview["plan"]["summary"]["create"], 2, "{preview}");

    // Apply: planned, then waits for a second person.
    let (code, op) = server.call("POST", ops, &alice, Some(json!({"kind": "apply"})));
    assert_eq!(code, 202, "{op}");
    let id = op["id"].as_str().unwrap().to_string();
    let waiting = server.wait_for(&alice, &id, "awaiting_approval");
    assert!(waiting["planHash"].is_string(), "{waiting}");
    assert!(
        !work.join("cloud-server").exists() || cloud_objects(&work.join("cloud-server")).is_empty()
    );
    // Watch while it is approved and runs.
    let url = format!("{}/api/v1/operations/{id}/events", server.base);
    let viewer_token = alice.clone();
    let watcher = std::thread::spawn(move || {
        let mut response = agent()
            .get(&url)
            .header("Authorization", format!("Bearer {viewer_token}"))
            .call()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let content_type = response
            .headers()
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let mut text = String::new();
        response
            .body_mut()
            .as_reader()
            .read_to_string(&mut text)
            .unwrap();
        (content_type, text)
    });
    let (code, body) = server.call(
        "POST",
        &format!("/api/v1/operations/{id}/approve"),
        &alice,
        None,
    );
    assert_eq!(code, 403, "an operator cannot approve: {body}");
    let (code, body) = server.call(
        "POST",
        &format!("/api/v1/operations/{id}/approve"),
        &bob,
        None,
    );
    assert_eq!(code, 200, "{body}");
    let done = server.wait_for(&alice, &id, "succeeded");
    assert_eq!(done["approvedBy"], "bob");
    let revision = done["revision"].as_u64().expect("a release");
    let (content_type, stream) = watcher.join().unwrap();
    assert_eq!(content_type, "text/event-stream");
    let events = kusion_tests::api_server::sse_data(&stream);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order: {seqs:?}");
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "status" => format!("status:{}", e["status"].as_str().unwrap()),
            other => format!("{other}:{}", e["id"].as_str().unwrap_or("")),
        })
        .collect();
    for expected in [
        "status:queued",
        "planned:",
        "status:awaiting_approval",
        "step_started:t:web",
        "step_finished:t:web",
        "step_finished:t:db",
        "status:succeeded",
    ] {
        assert!(
            kinds.contains(&expected.to_string()),
            "{expected} in {kinds:?}"
        );
    }
    assert_eq!(kinds.last().map(String::as_str), Some("status:succeeded"));
    let web_done = kinds
        .iter()
        .position(|k| k == "step_finished:t:web")
        .unwrap();
    let db_start = kinds.iter().position(|k| k == "step_started:t:db").unwrap();
    assert!(
        web_done < db_start,
        "dependsOn respected in the stream: {kinds:?}"
    );

    // History through the API, and on disk where `kusionctl state history` reads it.
    let (code, releases) = server.call(
        "GET",
        "/api/v1/projects/inv/stacks/dev/releases",
        &alice,
        None,
    );
    assert_eq!(code, 200, "{releases}");
    assert_eq!(releases.as_array().unwrap().len(), 1);
    let (code, release) = server.call(
        "GET",
        &format!("/api/v1/projects/inv/stacks/dev/releases/{revision}"),
        &alice,
        None,
    );
    assert_eq!(code, 200, "{release}");
    let served: Release = serde_json::from_value(release).unwrap();
    let on_disk = LocalStore::new(stack.join(".kusion/state"))
        .release(revision)
        .unwrap();
    assert_eq!(served, on_disk);

    // The same stack through `kusionctl apply`.
    let cli_root = work.join("cli");
    let cli_stack = layout(&cli_root);
    let out = command(&cli_stack, &home, &work.join("cloud-cli"))
        .args(["apply", "--yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let by_cli = LocalStore::new(cli_stack.join(".kusion/state"))
        .release(1)
        .unwrap();
    assert_eq!(served.operation, by_cli.operation);
    assert_eq!(served.status, by_cli.status);
    assert_eq!(served.spec, by_cli.spec, "the same spec recorded");
    assert_eq!(
        served.steps, by_cli.steps,
        "the same steps and outcomes recorded"
    );
    assert_eq!(served.notes, by_cli.notes);
    assert_eq!(served.holder.operation, by_cli.holder.operation);
    assert_eq!(
        cloud_objects(&work.join("cloud-server")),
        cloud_objects(&work.join("cloud-cli")),
        "the same resources created"
    );

    // Reads under load, for the note: sequential, so latency is the server's alone.
    let mut took = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let (code, _) = server.call(
            "GET",
            "/api/v1/projects/inv/stacks/dev/releases",
            &alice,
            None,
        );
        took.push(t.elapsed());
        assert_eq!(code, 200);
    }
    took.sort();
    eprintln!(
        "GET releases x200: p50 {:?}, p99 {:?}, max {:?}",
        took[100], took[197], took[199]
    );

    // 200 clients at once, each reading the stacks and the history 5 times (a figure for the
    // note, not a bar: debug build, shared machine).
    let started = Instant::now();
    let clients: Vec<_> = (0..200)
        .map(|n| {
            let (base, token) = (server.base.clone(), alice.clone());
            std::thread::spawn(move || {
                let agent = agent();
                let mut took = Vec::new();
                for i in 0..5 {
                    let path = if (n + i) % 2 == 0 {
                        "/api/v1/projects"
                    } else {
                        "/api/v1/projects/inv/stacks/dev/releases"
                    };
                    let t = Instant::now();
                    let response = agent
                        .get(format!("{base}{path}"))
                        .header("Authorization", format!("Bearer {token}"))
                        .call()
                        .unwrap();
                    assert_eq!(response.status().as_u16(), 200);
                    took.push(t.elapsed());
                }
                took
            })
        })
        .collect();
    let mut took: Vec<Duration> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    took.sort();
    eprintln!(
        "200 concurrent clients x5 reads: {} requests in {:?}, p50 {:?}, p99 {:?}, max {:?}",
        took.len(),
        started.elapsed(),
        took[took.len() / 2],
        took[took.len() * 99 / 100],
        took[took.len() - 1]
    );

    // The tokens were printed once and went nowhere else.
    let audit = std::fs::read_to_string(root.join(".kusion/server/audit.jsonl")).unwrap();
    assert!(audit.contains("\"subject\":\"bob\""), "{audit}");
    drop(server);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("DEBUG"), "debug logging was on: {logged}");
    let at_rest = std::fs::read_to_string(root.join(".kusion/server/tokens.json")).unwrap();
    for token in [&admin, &alice, &bob] {
        assert!(
            !logged.contains(token.as_str()),
            "a token in the server's log"
        );
        assert!(!audit.contains(token.as_str()), "a token in the audit log");
        assert!(!at_rest.contains(token.as_str()), "a token at rest");
    }
}

/// Single sign-on on the real binary: `--oidc-issuer` reads the issuer's keys at start (and the
/// server does not start when it cannot), a JWT of a mapped group acts with its role, and the
/// operation names the JWT's subject.
#[test]
fn oidc_jwts_authenticate_on_the_real_server() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let root = work.join("served");
    layout(&root);
    let cloud = work.join("cloud");

    let out = command(&root, &home, &cloud)
        .args(["server", "--listen", "127.0.0.1:0"])
        .args([
            "--oidc-issuer",
            "http://127.0.0.1:9/gone",
            "--oidc-audience",
            "kusion",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("127.0.0.1:9/gone"),
        "an unreachable issuer stops the start: {said}"
    );

    let issuer = kusion_tests::oidc_issuer::Issuer::start();
    let mut c = command(&root, &home, &cloud);
    c.args(["server", "--listen", "127.0.0.1:0", "-vv"])
        .args(["--oidc-issuer", &issuer.url, "--oidc-audience", "kusion"])
        .args([
            "--oidc-role",
            "inv-ops=inv:operator",
            "--oidc-role",
            "all=*:viewer",
        ]);
    let server = ApiServer::start(c, &work.join("server.log"));

    let olivia = issuer.token("olivia", &["inv-ops"], "kusion");
    let (code, projects) = server.call("GET", "/api/v1/projects", &olivia, None);
    assert_eq!(code, 200, "{projects}");
    assert_eq!(projects[0]["name"], "inv", "{projects}");
    let ops = "/api/v1/projects/inv/stacks/dev/operations";
    let (code, op) = server.call("POST", ops, &olivia, Some(json!({"kind": "preview"})));
    assert_eq!(code, 202, "{op}");
    let done = server.wait_for(&olivia, op["id"].as_str().unwrap(), "succeeded");
    assert_eq!(done["requestedBy"], "olivia", "{done}");

    let victor = issuer.token("victor", &["all"], "kusion");
    let (code, _) = server.call("POST", ops, &victor, Some(json!({"kind": "preview"})));
    assert_eq!(code, 403, "a viewer group may not start operations");
    let elsewhere = issuer.token("olivia", &["inv-ops"], "another-app");
    let (code, body) = server.call("GET", "/api/v1/projects", &elsewhere, None);
    assert_eq!(code, 401, "{body}");
    let log = std::fs::read_to_string(work.join("server.log")).unwrap();
    for token in [&olivia, &victor, &elsewhere] {
        assert!(
            !log.contains(token.rsplit('.').next().unwrap()),
            "a JWT was logged"
        );
    }
}

/// The repository's HEAD commit.
fn head(dir: &Path) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=kusion",
            "-c",
            "user.email=dev@kusion.local",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Konfig repository served from Git: fetched at start, followed to each new commit of the
/// ref, with the stack's state kept in the data folder, so the release applied on one revision
/// is the history the next revision plans against.
#[test]
fn a_git_source_is_served_and_followed_with_state_kept_across_revisions() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let repo = work.join("repo");
    layout(&repo);
    git(&repo, &["init", "--quiet", "-b", "main"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "first"]);
    let elsewhere = work.join("run");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let data = work.join("data");
    let url = format!("file://{}", repo.display());

    let out = command(&elsewhere, &home, &work.join("cloud"))
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--git",
            &url,
            "--git-ref",
            "nope",
        ])
        .output()
        .unwrap();
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("nope"),
        "a ref that cannot be fetched stops the start: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut c = command(&elsewhere, &home, &work.join("cloud"));
    c.args(["server", "--listen", "127.0.0.1:0", "-vv", "--git", &url])
        .args(["--git-poll", "300ms", "--data-dir"])
        .arg(&data);
    let server = ApiServer::start(c, &work.join("server.log"));
    let alice = server.mint(&server.admin, "alice", json!({"inv": "operator"}));
    let bob = server.mint(&server.admin, "bob", json!({"inv": "approver"}));
    let (code, projects) = server.call("GET", "/api/v1/projects", &alice, None);
    assert_eq!(code, 200, "{projects}");
    assert_eq!(projects[0]["stacks"][0]["stack"], "dev", "{projects}");

    let ops = "/api/v1/projects/inv/stacks/dev/operations";
    let (code, op) = server.call("POST", ops, &alice, Some(json!({"kind": "apply"})));
    assert_eq!(code, 202, "{op}");
    let id = op["id"].as_str().unwrap().to_string();
    server.wait_for(&alice, &id, "awaiting_approval");
    let (code, _) = server.call(
        "POST",
        &format!("/api/v1/operations/{id}/approve"),
        &bob,
        None,
    );
    assert_eq!(code, 200);
    let applied = server.wait_for(&alice, &id, "succeeded");
    assert_eq!(applied["revision"], 1, "{applied}");
    let first_commit = head(&repo);
    assert_eq!(
        applied["sourceRevision"], first_commit,
        "the operation names the commit it applied"
    );
    assert!(
        data.join("state/inv/dev").is_dir(),
        "local state is kept outside the fetched trees"
    );

    // A new commit on the ref is served within a few polls.
    let main_k = repo.join("inv/dev/main.k");
    let text = std::fs::read_to_string(&main_k).unwrap();
    std::fs::write(&main_k, text.replacen("size = 1", "size = 7", 1)).unwrap();
    git(&repo, &["commit", "--quiet", "-am", "bigger web"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, spec) = server.call("GET", "/api/v1/projects/inv/stacks/dev/spec", &alice, None);
        assert_eq!(code, 200, "{spec}");
        if spec["resources"][0]["attributes"]["size"] == 7 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new commit was never served: {spec}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Planned against the state the first revision's apply left.
    let (code, op) = server.call("POST", ops, &alice, Some(json!({"kind": "preview"})));
    assert_eq!(code, 202, "{op}");
    let preview = server.wait_for(&alice, op["id"].as_str().unwrap(), "succeeded");
    assert_eq!(preview["plan"]["summary"]["update"], 1, "{preview}");
    assert_eq!(preview["sourceRevision"], head(&repo), "{preview}");
    assert_ne!(preview["sourceRevision"], first_commit.as_str());
    assert_eq!(preview["plan"]["summary"]["create"], 0, "{preview}");
    let (_, releases) = server.call(
        "GET",
        "/api/v1/projects/inv/stacks/dev/releases",
        &alice,
        None,
    );
    assert_eq!(releases.as_array().map(Vec::len), Some(1), "{releases}");
}
