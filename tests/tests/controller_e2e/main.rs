//! GitOps end to end (issue 25): `kusionctl controller` on the real control plane, serving
//! Stacks whose Konfig repository (`examples/konfig`, copied into a temporary Git repository) is
//! served by `git daemon` on 127.0.0.1.
//!
//! - a commit is applied (the time from push to the live change is printed), live drift is
//!   corrected within an interval, a policy deny stalls the Stack with the finding, preview-only
//!   reports drift without changing anything, a plan waits for approval (given through
//!   `kusionctl server`'s API, which records it on the Stack as the approval annotation), and a
//!   Stack deleted with `deletionPolicy: destroy` takes its resources with it;
//! - two controller processes elect one leader through a Lease; killing it hands over within
//!   the lease time, the state history shows every revision applied once, and a Stack deleted
//!   with the default policy leaves its resources;
//! - [`failures`]: credentials from a Secret for a source behind basic auth, a resource never
//!   ready, a leader losing its Lease.
//!
//! Over 800 lines: one end-to-end story on one control plane and one Git server, the steps
//! sharing them; each test stands alone.

mod failures;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kusion_controller::crd::{Stack, StackSpec};
use kusion_k8s_harness::ControlPlane;
use kusion_tests::api_server::ApiServer;
use kusion_tests::cli::{built, copy_dir, kusionctl};
use serde_json::{Value, json};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "ci")
        .env("GIT_AUTHOR_EMAIL", "ci@example.com")
        .env("GIT_COMMITTER_NAME", "ci")
        .env("GIT_COMMITTER_EMAIL", "ci@example.com")
        .output()
        .expect("running git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Konfig repository: a working copy pushing to a bare repository that `git daemon` serves.
struct Repo {
    src: PathBuf,
    url: String,
    daemon: Child,
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

impl Repo {
    fn new(work: &Path, prepare: impl FnOnce(&Path)) -> Repo {
        let src = work.join("src");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/konfig"),
            &src,
        );
        prepare(&src);
        git(&src, &["init", "--quiet", "-b", "main"]);
        git(&src, &["add", "-A"]);
        git(&src, &["commit", "--quiet", "-m", "konfig"]);
        let served = work.join("served");
        std::fs::create_dir_all(&served).unwrap();
        git(
            work,
            &[
                "clone",
                "--quiet",
                "--bare",
                src.to_str().unwrap(),
                served.join("konfig.git").to_str().unwrap(),
            ],
        );
        git(
            &src,
            &[
                "remote",
                "add",
                "origin",
                served.join("konfig.git").to_str().unwrap(),
            ],
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(work.join("git-daemon.log")).unwrap();
        let daemon = Command::new("git")
            .args([
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", served.display()),
                served.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting git daemon (is git installed with git-daemon?)");
        let url = format!("git://127.0.0.1:{port}/konfig.git");
        let repo = Repo { src, url, daemon };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let ok = Command::new("git")
                .args(["ls-remote", &repo.url])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "git daemon did not serve {} within 15s: {}",
                repo.url,
                std::fs::read_to_string(work.join("git-daemon.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        repo
    }

    /// Write `text` to `file` (relative to the repository), commit and push; the new revision.
    fn commit(&self, file: &str, text: &str) -> String {
        std::fs::write(self.src.join(file), text).unwrap();
        git(
            &self.src,
            &["commit", "--quiet", "-am", &format!("edit {file}")],
        );
        git(&self.src, &["push", "--quiet", "origin", "main"]);
        self.head()
    }

    fn head(&self) -> String {
        git(&self.src, &["rev-parse", "HEAD"])
    }
}

/// A running `kusionctl controller`, killed on drop; its log is shown when a test fails.
struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    fn start(cp: &ControlPlane, work: &Path, name: &str, extra: &[&str]) -> Controller {
        built("libkusion_runtime_kubernetes.so");
        built("libkusion_policy_kcl.so");
        let log = work.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(kusionctl())
            .args([
                "controller",
                "--kubeconfig",
                cp.kubeconfig_path().to_str().unwrap(),
                "--context",
                cp.context(),
                "--identity",
                name,
                "--cache-dir",
                work.join(format!("{name}-cache")).to_str().unwrap(),
                "--state-root",
                work.join("state").to_str().unwrap(),
                "--install-crd",
            ])
            .args(extra)
            .current_dir(work)
            .env("HOME", work)
            .env("KUSION_LOG", "info,kube=warn")
            .env("KUSION_PLUGINS__ONLY", "kubernetes,kcl-policy")
            .env_remove("KUBECONFIG")
            .env_remove("KUSION_STATE_DIR")
            .env_remove("KUSION_PLUGIN_PATH")
            .env_remove("KUSION_CONFIG")
            .env_remove("KUSION_RUNTIME_CONFIG")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("starting kusionctl controller");
        Controller { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- {} ---\n{}", self.log.display(), self.log());
        }
    }
}

/// `kusionctl server` serving the control plane's Stacks (and an empty checkout).
fn start_server(cp: &ControlPlane, work: &Path) -> ApiServer {
    let root = work.join("server-root");
    std::fs::create_dir_all(&root).unwrap();
    let mut command = Command::new(kusionctl());
    command
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--kubeconfig",
            cp.kubeconfig_path().to_str().unwrap(),
            "--context",
            cp.context(),
        ])
        .current_dir(&root)
        .env("HOME", work)
        .env("KUSION_PLUGINS__ONLY", "kubernetes")
        .env_remove("KUBECONFIG")
        .env_remove("KUSION_CONFIG")
        .stdin(Stdio::null());
    ApiServer::start(command, &work.join("server.log"))
}

fn namespace(cp: &ControlPlane, name: &str) {
    let api: Api<Namespace> = Api::all(cp.client().unwrap());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    match cp.block_on(api.create(&PostParams::default(), &ns)) {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

/// Poll `probe` every 100 ms until it gives a value; panics with `what` and the last Stack
/// status after `timeout`.
fn wait_for<T>(
    cp: &ControlPlane,
    stacks: &Api<Stack>,
    name: &str,
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut(Option<&Stack>) -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let stack = cp.block_on(stacks.get_opt(name)).unwrap();
        if let Some(v) = probe(stack.as_ref()) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {timeout:?}; stack status: {:#}",
            serde_json::to_value(stack.and_then(|s| s.status)).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn condition<'a>(stack: &'a Stack, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    let c = stack.status.as_ref()?.condition(type_)?;
    Some((c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

fn applied_revision(stack: Option<&Stack>) -> Option<String> {
    stack?.status.as_ref()?.last_applied_revision.clone()
}

fn event_reasons(cp: &ControlPlane, ns: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(cp.client().unwrap(), ns);
    cp.block_on(api.list(&Default::default()))
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

fn stack_spec(value: Value) -> StackSpec {
    serde_json::from_value(value).unwrap()
}

const GUESTBOOK_MAIN: &str = "projects/guestbook/dev/main.k";

fn guestbook_main(replicas: u32) -> String {
    format!(
        "import konfig.models.frontend\n\n_guestbook: frontend.Server {{\n    replicas = {replicas}\n}}\n"
    )
}

fn replicas(cp: &ControlPlane) -> Option<i32> {
    let api: Api<Deployment> = Api::namespaced(cp.client().unwrap(), "guestbook");
    cp.block_on(api.get_opt("guestbook"))
        .unwrap()?
        .spec?
        .replicas
}

fn log_level(cp: &ControlPlane) -> Option<String> {
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), "guestbook");
    cp.block_on(api.get_opt("guestbook-config"))
        .unwrap()?
        .data?
        .get("LOG_LEVEL")
        .cloned()
}

/// Change the ConfigMap with the API, behind kusion's back.
fn tamper(cp: &ControlPlane) {
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), "guestbook");
    cp.block_on(api.patch(
        "guestbook-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"LOG_LEVEL": "tampered"}})),
    ))
    .unwrap();
}

#[test]
fn gitops_commit_drift_policy_preview_approval_and_destroy() {
    let cp = ControlPlane::shared();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    // A policy in the stack folder: at most 3 replicas.
    let repo = Repo::new(work, |src| {
        let stack = src.join("projects/guestbook/dev");
        let set = stack.join("policies/replicas");
        std::fs::create_dir_all(&set).unwrap();
        std::fs::write(
            set.join("policy.toml"),
            "name = \"replicas\"\nversion = \"1.0.0\"\n\n[rules.MaxReplicas]\nseverity = \"deny\"\ntypes = [\"Kubernetes\"]\n",
        )
        .unwrap();
        std::fs::write(
            set.join("rules.k"),
            "rule MaxReplicas:\n    resource.attributes.kind != \"Deployment\" or resource.attributes.spec.replicas <= 3, \"${resource.attributes.spec.replicas} replicas is over the limit of 3\"\n",
        )
        .unwrap();
        std::fs::write(
            stack.join("kusion.toml"),
            "[policy.plugins.kcl-policy]\nconfig = { sets = [\"policies/replicas\"] }\n",
        )
        .unwrap();
    });
    let ns = "ctl-a";
    namespace(cp, ns);
    let _controller = Controller::start(cp, work, "ctl-a", &["--namespace", ns]);
    let client = cp.client().unwrap();
    let stacks: Api<Stack> = Api::namespaced(client.clone(), ns);
    // The controller installs the CRD; the API serves Stacks once it is established.
    let deadline = Instant::now() + Duration::from_secs(60);
    while cp.block_on(stacks.list(&Default::default())).is_err() {
        assert!(Instant::now() < deadline, "the Stack CRD was not served");
        std::thread::sleep(Duration::from_millis(200));
    }

    let interval = Duration::from_secs(3);
    let stack = Stack::new(
        "guestbook",
        ns,
        stack_spec(json!({
            "source": {"url": repo.url, "ref": "main", "path": "projects/guestbook/dev"},
            "interval": "3s",
            "wait": true,
            "waitTimeout": "60s",
            "deletionPolicy": "destroy"
        })),
    );
    cp.block_on(stacks.create(&PostParams::default(), &stack))
        .unwrap();
    let first = repo.head();
    wait_for(
        cp,
        &stacks,
        "guestbook",
        "first revision applied",
        Duration::from_secs(90),
        |s| (applied_revision(s)? == first).then_some(()),
    );
    assert_eq!(replicas(cp), Some(2));
    let s = cp.block_on(stacks.get("guestbook")).unwrap();
    assert_eq!(condition(&s, "Ready").map(|c| c.0), Some("True"), "{s:?}");
    assert!(
        s.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&kusion_controller::crd::FINALIZER.to_string())
    );

    // A commit reaches the cluster within an interval (plus the apply itself).
    let second = repo.commit(GUESTBOOK_MAIN, &guestbook_main(3));
    let pushed = Instant::now();
    let deadline = pushed + Duration::from_secs(60);
    while replicas(cp) != Some(3) {
        assert!(Instant::now() < deadline, "the commit was not applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = pushed.elapsed();
    eprintln!(
        "MEASURE commit->applied: {:.2}s (interval {}s, goal < 2s + interval)",
        took.as_secs_f64(),
        interval.as_secs()
    );
    assert!(
        took < interval + Duration::from_secs(10),
        "commit->applied took {took:?}"
    );
    wait_for(
        cp,
        &stacks,
        "guestbook",
        "second revision recorded",
        Duration::from_secs(30),
        |s| (applied_revision(s)? == second).then_some(()),
    );

    // Drift: the ConfigMap changed behind kusion's back is put back within an interval.
    tamper(cp);
    let tampered = Instant::now();
    let deadline = tampered + interval * 2 + Duration::from_secs(10);
    while log_level(cp).as_deref() != Some("debug") {
        assert!(Instant::now() < deadline, "drift not corrected");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "MEASURE drift corrected after {:.2}s (interval {}s)",
        tampered.elapsed().as_secs_f64(),
        interval.as_secs()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !event_reasons(cp, ns).iter().any(|r| r == "DriftCorrected") {
        assert!(
            Instant::now() < deadline,
            "no DriftCorrected event: {:?}",
            event_reasons(cp, ns)
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // A policy deny stalls the Stack with the finding; nothing changes.
    let denied = repo.commit(GUESTBOOK_MAIN, &guestbook_main(5));
    let message = wait_for(
        cp,
        &stacks,
        "guestbook",
        "Stalled by policy",
        Duration::from_secs(60),
        |s| {
            let s = s?;
            let (status, reason, message) = condition(s, "Stalled")?;
            (status == "True"
                && reason == "PolicyDenied"
                && s.status.as_ref()?.last_attempted_revision.as_deref() == Some(&denied))
            .then(|| message.to_string())
        },
    );
    assert!(message.contains("MaxReplicas"), "{message}");
    assert!(
        message.contains("5 replicas is over the limit"),
        "{message}"
    );
    assert_eq!(replicas(cp), Some(3), "a denied plan changes nothing");
    assert!(event_reasons(cp, ns).iter().any(|r| r == "PolicyDenied"));

    // Back under the limit, then preview-only: drift is reported, not corrected.
    let third = repo.commit(GUESTBOOK_MAIN, &guestbook_main(3));
    wait_for(
        cp,
        &stacks,
        "guestbook",
        "ready again",
        Duration::from_secs(60),
        |s| {
            let s = s?;
            (applied_revision(Some(s))? == third && condition(s, "Stalled")?.0 == "False")
                .then_some(())
        },
    );
    cp.block_on(stacks.patch(
        "guestbook",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"mode": "preview-only"}})),
    ))
    .unwrap();
    // Let the mode change be seen before tampering.
    wait_for(
        cp,
        &stacks,
        "guestbook",
        "preview-only observed",
        Duration::from_secs(30),
        |s| {
            let s = s?;
            (s.status.as_ref()?.observed_generation == s.metadata.generation
                && condition(s, "Reconciling")?.0 == "False")
                .then_some(())
        },
    );
    tamper(cp);
    let drift = wait_for(
        cp,
        &stacks,
        "guestbook",
        "drift reported",
        interval * 2 + Duration::from_secs(20),
        |s| {
            let s = s?;
            let (status, reason, _) = condition(s, "Ready")?;
            (status == "False" && reason == "DriftDetected")
                .then(|| s.status.as_ref().unwrap().drift.clone())
        },
    );
    assert_eq!(
        drift,
        ["Update v1:ConfigMap:guestbook:guestbook-config"],
        "{drift:?}"
    );
    std::thread::sleep(interval * 2);
    assert_eq!(
        log_level(cp).as_deref(),
        Some("tampered"),
        "preview-only changes nothing"
    );

    // The approval gate: a plan is recorded and applied only once its hash is approved.
    cp.block_on(stacks.patch(
        "guestbook",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"mode": "apply", "requireApproval": true}})),
    ))
    .unwrap();
    let hash = wait_for(
        cp,
        &stacks,
        "guestbook",
        "plan awaiting approval",
        Duration::from_secs(30),
        |s| {
            let s = s?;
            (condition(s, "Ready")?.1 == "AwaitingApproval")
                .then(|| s.status.as_ref()?.pending_plan.clone())
                .flatten()
        },
    );
    std::thread::sleep(interval * 2);
    assert_eq!(
        log_level(cp).as_deref(),
        Some("tampered"),
        "not approved yet"
    );
    // Approved through `kusionctl server`'s API, by an approver on the Stack's namespace.
    let server = start_server(cp, work);
    let approver = &server.mint(
        &server.admin,
        "release-manager",
        json!({format!("k8s/{ns}"): "approver"}),
    );
    let (code, listed) = server.call("GET", "/api/v1/kubernetes/stacks", approver, None);
    assert_eq!(code, 200, "{listed}");
    assert_eq!(listed[0]["name"], "guestbook", "{listed}");
    assert_eq!(listed[0]["pendingPlan"], hash.as_str(), "{listed}");
    assert_eq!(
        listed[0]["plan"]["changes"],
        json!(["Update v1:ConfigMap:guestbook:guestbook-config"]),
        "{listed}"
    );
    let approve = format!("/api/v1/kubernetes/namespaces/{ns}/stacks/guestbook/approve");
    let (code, refused) = server.call(
        "POST",
        &approve,
        approver,
        Some(json!({"planHash": "0123456789abcdef"})),
    );
    assert_eq!(code, 409, "a plan the Stack does not wait for: {refused}");
    let approved_at = Instant::now();
    let (code, approved) = server.call("POST", &approve, approver, Some(json!({"planHash": hash})));
    assert_eq!(code, 200, "{approved}");
    assert_eq!(approved["approvedBy"], "release-manager", "{approved}");
    let message = wait_for(
        cp,
        &stacks,
        "guestbook",
        "the approved plan applied",
        Duration::from_secs(30),
        |s| {
            let (_, reason, message) = condition(s?, "Ready")?;
            (reason == "DriftCorrected" || reason == "Applied").then(|| message.to_string())
        },
    );
    assert!(message.contains("approved by release-manager"), "{message}");
    assert_eq!(log_level(cp).as_deref(), Some("debug"));
    println!(
        "approval through the server's API to applied: {:.2}s",
        approved_at.elapsed().as_secs_f64()
    );
    drop(server);

    // deletionPolicy destroy: the Stack's resources go with it.
    cp.block_on(stacks.delete("guestbook", &DeleteParams::default()))
        .unwrap();
    wait_for(
        cp,
        &stacks,
        "guestbook",
        "Stack deleted after destroying",
        Duration::from_secs(60),
        |s| s.is_none().then_some(()),
    );
    assert_eq!(replicas(cp), None, "destroyed with the Stack");
}

#[test]
fn two_controllers_elect_one_leader_and_hand_over_when_it_dies() {
    let cp = ControlPlane::shared();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let repo = Repo::new(work, |_| {});
    let ns = "ctl-b";
    namespace(cp, ns);
    let lease = [
        "--namespace",
        ns,
        "--leader-elect",
        "--lease-duration",
        "4s",
    ];
    let mut a = Controller::start(cp, work, "replica-a", &lease);
    let mut b = Controller::start(cp, work, "replica-b", &lease);
    let client = cp.client().unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let holder = || {
        cp.block_on(leases.get_opt("kusion-controller"))
            .unwrap()
            .and_then(|l| l.spec?.holder_identity)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let leader = loop {
        if let Some(h) = holder() {
            break h;
        }
        assert!(Instant::now() < deadline, "nobody took the lease");
        std::thread::sleep(Duration::from_millis(100));
    };
    let stacks: Api<Stack> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    while cp.block_on(stacks.list(&Default::default())).is_err() {
        assert!(Instant::now() < deadline, "the Stack CRD was not served");
        std::thread::sleep(Duration::from_millis(200));
    }
    let stack = Stack::new(
        "cache",
        ns,
        stack_spec(json!({
            "source": {"url": repo.url, "path": "projects/cache/dev"},
            "interval": "2s"
        })),
    );
    cp.block_on(stacks.create(&PostParams::default(), &stack))
        .unwrap();
    let first = repo.head();
    wait_for(
        cp,
        &stacks,
        "cache",
        "applied by the leader",
        Duration::from_secs(90),
        |s| (applied_revision(s)? == first).then_some(()),
    );
    let (dead, follower, survivor) = if leader == "replica-a" {
        (&mut a, &b, "replica-b")
    } else {
        (&mut b, &a, "replica-a")
    };
    // The follower waits for the lease and reconciles nothing meanwhile.
    let log = follower.log();
    assert!(log.contains("waiting for the lease"), "{log}");
    assert!(!log.contains("controller running"), "{log}");
    dead.kill();
    let killed = Instant::now();
    let second = repo.commit(
        "projects/cache/dev/main.k",
        "import konfig.models.frontend\n\n_cache: frontend.Server {\n    namespace = \"cache-dev\"\n    replicas = 2\n}\n",
    );
    let deadline = killed + Duration::from_secs(30);
    while holder().as_deref() != Some(survivor) {
        assert!(Instant::now() < deadline, "{survivor} did not take over");
        std::thread::sleep(Duration::from_millis(50));
    }
    let takeover = killed.elapsed();
    eprintln!(
        "MEASURE leader takeover after kill: {:.2}s (lease 4s)",
        takeover.as_secs_f64()
    );
    assert!(
        takeover < Duration::from_secs(4) + Duration::from_secs(3),
        "takeover took {takeover:?}"
    );
    wait_for(
        cp,
        &stacks,
        "cache",
        "applied by the new leader",
        Duration::from_secs(60),
        |s| (applied_revision(s)? == second).then_some(()),
    );
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), "cache-dev");
    assert_eq!(
        cp.block_on(sts.get("cache"))
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(2)
    );
    // Nothing applied twice: one release per revision in the shared state.
    std::thread::sleep(Duration::from_secs(3));
    let store = kusion_kernel::state::open("local", work.join("state").join(ns).join("cache"), "x")
        .unwrap();
    let releases = store.releases().unwrap();
    let summary: Vec<String> = releases
        .iter()
        .map(|r| format!("{} {:?} {}", r.operation, r.status, r.holder.owner))
        .collect();
    assert_eq!(releases.len(), 2, "{summary:?}");

    // The default deletion policy orphans: the Stack goes, its resources stay.
    cp.block_on(stacks.delete("cache", &DeleteParams::default()))
        .unwrap();
    wait_for(
        cp,
        &stacks,
        "cache",
        "Stack deleted",
        Duration::from_secs(30),
        |s| s.is_none().then_some(()),
    );
    assert!(cp.block_on(sts.get_opt("cache")).unwrap().is_some());
}

/// The 1, 5 and 15 minute load averages, as `uptime` shows them (the machine is shared).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Resident and peak resident memory of a process, in MiB (from /proc).
fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The scale bar: N Stacks (default 1,000; `KUSION_CONTROLLER_BENCH_STACKS`) of a one-resource
/// stack on the fake-cloud runtime (no cluster objects), reconciled by one controller; prints
/// the time of the first pass (fetch, compile, apply) and of a steady-state pass (fetch,
/// compile, a read-only plan, nothing to do, status written), the controller's memory and the
/// machine's load.
/// `cargo test --release -p kusion-tests --test controller_e2e bench -- --ignored --nocapture`
/// (after `cargo build --release -p kusionctl -p kusion-test-runtime`: the test runs the
/// `kusionctl` and plugin of its own profile).
#[test]
#[ignore = "a benchmark: run explicitly"]
fn bench_many_stacks_one_controller() {
    let n: usize = std::env::var("KUSION_CONTROLLER_BENCH_STACKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    built("libkusion_test_runtime.so");
    let cp = ControlPlane::shared();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let repo = Repo::new(work, |src| {
        let stack = src.join("projects/bench/s");
        std::fs::create_dir_all(&stack).unwrap();
        std::fs::write(src.join("projects/bench/project.yaml"), "name: bench\n").unwrap();
        std::fs::write(stack.join("stack.yaml"), "name: s\n").unwrap();
        std::fs::write(
            stack.join("kcl.yaml"),
            "kcl_cli_configs:\n  files:\n    - main.k\n",
        )
        .unwrap();
        std::fs::write(
            stack.join("main.k"),
            "resources = [{id = \"t:a\", type = \"Test\", attributes = {size = 1}}]\n",
        )
        .unwrap();
    });
    let ns = "ctl-bench";
    namespace(cp, ns);
    let cloud = work.join("cloud");
    std::fs::create_dir_all(&cloud).unwrap();
    let log = work.join("bench.log");
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(kusionctl())
        .args([
            "controller",
            "--kubeconfig",
            cp.kubeconfig_path().to_str().unwrap(),
            "--context",
            cp.context(),
            "--namespace",
            ns,
            "--cache-dir",
            work.join("cache").to_str().unwrap(),
            "--state-root",
            work.join("state").to_str().unwrap(),
            "--install-crd",
        ])
        .env("HOME", work)
        .env(
            "KUSION_LOG",
            std::env::var("KUSION_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .env("KUSION_PLUGINS__ONLY", "test")
        .env("KUSION_TEST_CLOUD", &cloud)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut controller = Controller { child, log };
    let pid = controller.child.id();
    let stacks: Api<Stack> = Api::namespaced(cp.client().unwrap(), ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    while cp.block_on(stacks.list(&Default::default())).is_err() {
        assert!(Instant::now() < deadline, "the Stack CRD was not served");
        std::thread::sleep(Duration::from_millis(200));
    }
    let spec = stack_spec(json!({
        "source": {"url": repo.url, "path": "projects/bench/s"},
        "interval": "1s"
    }));
    let created = Instant::now();
    for i in 0..n {
        let stack = Stack::new(&format!("s{i:04}"), ns, spec.clone());
        cp.block_on(stacks.create(&PostParams::default(), &stack))
            .unwrap();
    }
    let revision = repo.head();
    // Every Stack reconciled once after `since`.
    let pass = |since: k8s_openapi::jiff::Timestamp, first: bool, limit: Duration| {
        let started = Instant::now();
        loop {
            let list = cp.block_on(stacks.list(&Default::default())).unwrap();
            let done = list
                .items
                .iter()
                .filter(|s| {
                    let Some(status) = &s.status else {
                        return false;
                    };
                    let recent = status
                        .last_reconcile_time
                        .as_deref()
                        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                        .is_some_and(|t| t > since);
                    recent && (!first || status.last_applied_revision.as_deref() == Some(&revision))
                })
                .count();
            if done == n {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "{done}/{n} Stacks reconciled within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let zero = k8s_openapi::jiff::Timestamp::UNIX_EPOCH;
    pass(zero, true, Duration::from_secs(1800));
    let first = created.elapsed();
    eprintln!(
        "MEASURE {n} stacks: first pass (fetch, compile, apply) {:.1}s, load average {}",
        first.as_secs_f64(),
        load_average()
    );
    let since = k8s_openapi::jiff::Timestamp::now();
    let load_before = load_average();
    let steady = pass(since, false, Duration::from_secs(1800));
    let (rss, peak) = memory_mib(pid);
    eprintln!(
        "MEASURE {n} stacks: steady-state pass {:.1}s ({:.1} ms/stack), controller RSS {rss:.0} MiB (peak {peak:.0} MiB), load average {load_before} before, {} after",
        steady.as_secs_f64(),
        steady.as_secs_f64() * 1000.0 / n as f64,
        load_average()
    );
    controller.kill();
    if let Some(keep) = std::env::var_os("KUSION_BENCH_KEEP_LOG") {
        std::fs::copy(&controller.log, keep).unwrap();
    }
}
