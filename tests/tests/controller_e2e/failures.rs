//! What goes wrong, end to end: a Git source behind HTTP basic authentication (credentials from
//! a Secret, never shown), a resource that never becomes ready, and a leader that loses its
//! Lease and stands again as a candidate.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::PostParams;
use kusion_controller::crd::Stack;
use kusion_tests::git_http::GitHttp;
use serde_json::json;

use super::{Controller, Repo, applied_revision, condition, namespace, stack_spec, wait_for};

/// A stack of raw resources at `projects/<project>/<stack>` in the repository being prepared.
fn raw_stack(src: &Path, project: &str, stack: &str, resources: &str) {
    let dir = src.join("projects").join(project).join(stack);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        src.join("projects").join(project).join("project.yaml"),
        format!("name: {project}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("stack.yaml"), format!("name: {stack}\n")).unwrap();
    std::fs::write(
        dir.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(dir.join("main.k"), resources).unwrap();
}

fn config_map(ns: &str, name: &str, value: &str) -> String {
    format!(
        "resources = [{{\n    id = \"v1:ConfigMap:{ns}:{name}\"\n    type = \"Kubernetes\"\n    attributes = {{apiVersion = \"v1\", kind = \"ConfigMap\", metadata = {{name = \"{name}\", namespace = \"{ns}\"}}, data = {{value = \"{value}\"}}}}\n}}]\n"
    )
}

fn config_value(cp: &kusion_k8s_harness::ControlPlane, ns: &str, name: &str) -> Option<String> {
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), ns);
    cp.block_on(api.get_opt(name))
        .unwrap()?
        .data?
        .get("value")
        .cloned()
}

/// Every Event note in `ns`, one per line.
fn event_notes(cp: &kusion_k8s_harness::ControlPlane, ns: &str) -> String {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(cp.client().unwrap(), ns);
    cp.block_on(api.list(&Default::default()))
        .unwrap()
        .items
        .into_iter()
        .map(|e| format!("{:?} {}", e.reason, e.note.unwrap_or_default()))
        .collect::<Vec<_>>()
        .join("\n")
}

const PASSWORD: &str = "pa55-Wd.never-to-be-seen";

#[test]
fn a_source_behind_basic_auth_is_fetched_with_the_secret_and_never_shown() {
    let cp = kusion_k8s_harness::ControlPlane::shared();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let ns = "ctl-auth";
    let repo = Repo::new(work, |src| {
        raw_stack(src, "private", "dev", &config_map(ns, "from-private", "1"))
    });
    let http = GitHttp::start(&work.join("served"), "kusion-bot", PASSWORD);
    let url = format!("{}/konfig.git", http.base);
    namespace(cp, ns);
    let controller = Controller::start(cp, work, "ctl-auth", &["--namespace", ns]);
    let client = cp.client().unwrap();
    let stacks: Api<Stack> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    while cp.block_on(stacks.list(&Default::default())).is_err() {
        assert!(Instant::now() < deadline, "the Stack CRD was not served");
        std::thread::sleep(Duration::from_millis(200));
    }
    let spec = |secret: Option<&str>| {
        let mut source = json!({"url": url, "path": "projects/private/dev"});
        if let Some(s) = secret {
            source["secretRef"] = json!({"name": s});
        }
        stack_spec(json!({"source": source, "interval": "2s"}))
    };
    // No secretRef: the server refuses, and the failure says so.
    cp.block_on(stacks.create(
        &PostParams::default(),
        &Stack::new("anonymous", ns, spec(None)),
    ))
    .unwrap();
    // A secretRef naming a Secret not there (yet): Stalled, naming it.
    cp.block_on(stacks.create(
        &PostParams::default(),
        &Stack::new("private", ns, spec(Some("git-auth"))),
    ))
    .unwrap();
    let message = wait_for(
        cp,
        &stacks,
        "private",
        "Stalled for want of the Secret",
        Duration::from_secs(60),
        |s| {
            let (status, reason, message) = condition(s?, "Stalled")?;
            (status == "True" && reason == "SecretNotFound").then(|| message.to_string())
        },
    );
    assert!(
        message.contains("ctl-auth/private") && message.contains("git-auth"),
        "{message}"
    );
    let anonymous = wait_for(
        cp,
        &stacks,
        "anonymous",
        "an unauthenticated fetch fails",
        Duration::from_secs(60),
        |s| {
            let (status, reason, message) = condition(s?, "Ready")?;
            (status == "False" && reason == "FetchFailed").then(|| message.to_string())
        },
    );
    assert!(anonymous.contains("ctl-auth/anonymous"), "{anonymous}");
    assert!(
        http.refused.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the server refused the anonymous fetch"
    );
    assert_eq!(config_value(cp, ns, "from-private"), None);

    // The Secret appears: the next retry fetches with it and applies.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "git-auth"},
        "stringData": {"username": "kusion-bot", "password": PASSWORD}
    }))
    .unwrap();
    cp.block_on(secrets.create(&PostParams::default(), &secret))
        .unwrap();
    let head = repo.head();
    wait_for(
        cp,
        &stacks,
        "private",
        "applied with the Secret's credentials",
        Duration::from_secs(60),
        |s| (applied_revision(s)? == head).then_some(()),
    );
    assert_eq!(config_value(cp, ns, "from-private").as_deref(), Some("1"));
    let s = cp.block_on(stacks.get("private")).unwrap();
    assert_eq!(condition(&s, "Stalled").map(|c| c.0), Some("False"));
    assert!(
        !http.seen.lock().unwrap().is_empty(),
        "the credentials reached the server"
    );

    // Nowhere the controller reports: status, Events, its log.
    use base64::Engine;
    let header = base64::engine::general_purpose::STANDARD.encode(format!("kusion-bot:{PASSWORD}"));
    let statuses = cp
        .block_on(stacks.list(&Default::default()))
        .unwrap()
        .items
        .iter()
        .map(|s| serde_json::to_string(&s.status).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let notes = event_notes(cp, ns);
    let log = controller.log();
    for (what, text) in [("status", &statuses), ("events", &notes), ("log", &log)] {
        assert!(!text.is_empty(), "{what} is empty");
        for secret in [PASSWORD, header.as_str()] {
            assert!(!text.contains(secret), "{what} shows a credential:\n{text}");
        }
    }
}

#[test]
fn a_resource_never_ready_fails_naming_it_and_is_retried_with_backoff() {
    let cp = kusion_k8s_harness::ControlPlane::shared();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let ns = "ctl-ready";
    // The fake kubelet never schedules this Deployment's pods.
    let deployment = format!(
        r#"resources = [{{
    id = "apps/v1:Deployment:{ns}:stuck"
    type = "Kubernetes"
    attributes = {{
        apiVersion = "apps/v1", kind = "Deployment"
        metadata = {{name = "stuck", namespace = "{ns}"}}
        spec = {{
            replicas = 1
            selector.matchLabels.app = "stuck"
            template = {{
                metadata = {{labels.app = "stuck", annotations = {{"harness.kusion.io/fault" = "Unschedulable"}}}}
                spec.containers = [{{name = "c", image = "nginx:1.25"}}]
            }}
        }}
    }}
}}]
"#
    );
    let repo = Repo::new(work, |src| raw_stack(src, "stuck", "dev", &deployment));
    namespace(cp, ns);
    let _controller = Controller::start(cp, work, "ctl-ready", &["--namespace", ns]);
    let client = cp.client().unwrap();
    let stacks: Api<Stack> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    while cp.block_on(stacks.list(&Default::default())).is_err() {
        assert!(Instant::now() < deadline, "the Stack CRD was not served");
        std::thread::sleep(Duration::from_millis(200));
    }
    let stack = Stack::new(
        "stuck",
        ns,
        stack_spec(json!({
            "source": {"url": repo.url, "path": "projects/stuck/dev"},
            "interval": "30s",
            "wait": true,
            "waitTimeout": "3s"
        })),
    );
    cp.block_on(stacks.create(&PostParams::default(), &stack))
        .unwrap();
    let first = wait_for(
        cp,
        &stacks,
        "stuck",
        "the apply fails on readiness",
        Duration::from_secs(90),
        |s| {
            let s = s?;
            let (status, reason, message) = condition(s, "Ready")?;
            let failures = s.status.as_ref()?.failures;
            (status == "False" && reason == "ApplyFailed").then(|| (message.to_string(), failures))
        },
    );
    assert!(
        first.0.contains("apps/v1:Deployment:ctl-ready:stuck")
            && first.0.contains("not ready after 3s")
            && first.0.contains("retrying in"),
        "{first:?}"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    assert!(
        cp.block_on(deployments.get_opt("stuck")).unwrap().is_some(),
        "the Deployment was created"
    );
    // Retried (the plan is empty now, so readiness itself is asked again), still failing, with
    // a growing wait; never reported ready.
    let started = Instant::now();
    let mut seen_ready = false;
    let again = wait_for(
        cp,
        &stacks,
        "stuck",
        "retried and failing again",
        Duration::from_secs(90),
        |s| {
            let s = s?;
            let (status, reason, message) = condition(s, "Ready")?;
            seen_ready |= status == "True";
            let failures = s.status.as_ref()?.failures;
            (failures >= first.1 + 2 && reason == "ApplyFailed").then(|| message.to_string())
        },
    );
    assert!(
        !seen_ready,
        "a Stack whose resource is not ready was reported ready"
    );
    assert!(
        again.contains("apps/v1:Deployment:ctl-ready:stuck") && again.contains("not ready"),
        "{again}"
    );
    // Two retries with 3 s waits each and a backoff of at least 2 s and 4 s between them.
    assert!(
        started.elapsed() >= Duration::from_secs(6),
        "retries came too fast: {:?}",
        started.elapsed()
    );
}

#[test]
fn a_leader_that_loses_its_lease_stops_and_stands_again() {
    let cp = kusion_k8s_harness::ControlPlane::shared();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let ns = "ctl-lost";
    let repo = Repo::new(work, |src| {
        raw_stack(src, "lost", "dev", &config_map(ns, "term", "1"))
    });
    namespace(cp, ns);
    let mut solo = Controller::start(
        cp,
        work,
        "solo",
        &[
            "--namespace",
            ns,
            "--leader-elect",
            "--lease-duration",
            "4s",
        ],
    );
    let client = cp.client().unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let holder = || {
        cp.block_on(leases.get_opt("kusion-controller"))
            .unwrap()
            .and_then(|l| l.spec?.holder_identity)
    };
    let stacks: Api<Stack> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(60);
    while holder().as_deref() != Some("solo")
        || cp.block_on(stacks.list(&Default::default())).is_err()
    {
        assert!(Instant::now() < deadline, "solo did not lead");
        std::thread::sleep(Duration::from_millis(200));
    }
    cp.block_on(stacks.create(
        &PostParams::default(),
        &Stack::new(
            "term",
            ns,
            stack_spec(
                json!({"source": {"url": repo.url, "path": "projects/lost/dev"}, "interval": "1s"}),
            ),
        ),
    ))
    .unwrap();
    let first = repo.head();
    wait_for(
        cp,
        &stacks,
        "term",
        "applied",
        Duration::from_secs(60),
        |s| (applied_revision(s)? == first).then_some(()),
    );

    // Someone else takes the Lease (as a replica would after a network partition).
    let mut lease = cp.block_on(leases.get("kusion-controller")).unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = Some("intruder".into());
    spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    cp.block_on(leases.replace("kusion-controller", &PostParams::default(), &lease))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !solo.log().contains("standing as a candidate again") {
        assert!(
            Instant::now() < deadline,
            "solo did not notice: {}",
            solo.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        solo.child.try_wait().unwrap().is_none(),
        "the controller exited instead of standing again"
    );
    // While the intruder holds the Lease nothing is applied; once its Lease runs out, solo
    // leads again and applies the new commit.
    let second = repo.commit("projects/lost/dev/main.k", &config_map(ns, "term", "2"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let h = holder();
        let v = config_value(cp, ns, "term");
        if h.as_deref() == Some("intruder") {
            assert_eq!(v.as_deref(), Some("1"), "applied while not leading");
        }
        if v.as_deref() == Some("2") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "solo did not lead again: {}",
            solo.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(holder().as_deref(), Some("solo"));
    wait_for(
        cp,
        &stacks,
        "term",
        "second applied",
        Duration::from_secs(30),
        |s| (applied_revision(s)? == second).then_some(()),
    );
    assert_eq!(
        solo.log().matches("became leader").count(),
        2,
        "{}",
        solo.log()
    );
    solo.kill();
}
