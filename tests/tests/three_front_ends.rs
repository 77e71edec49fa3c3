//! One Konfig stack on a real kube-apiserver through the three front ends of one `kusionctl`
//! binary: the REST API (preview, apply waiting for a second person's approval, progress watched
//! over Server-Sent Events, readiness watched), the web console in Chromium (the same steps clicked, screenshots
//! kept) and the command line (`kusionctl apply --watch`). The stack is destroyed between them,
//! and the three releases record the same operation, spec, steps and outcomes, and leave the same
//! objects in the cluster.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kusion_k8s_harness::ControlPlane;
use kusion_kernel::state::{LocalStore, Release, StateStore};
use kusion_tests::api_server::ApiServer;
use kusion_tests::chromium::{Page, browser, start_driver};
use kusion_tests::cli::{built, copy_dir, kusionctl_in, text};
use serde_json::{Value, json};

const NS: &str = "three-front-ends";
const STACK_LINK: &str = "tr.stack-row[data-stack='shop/dev'] a.stack-link";

/// The objects the stack makes, without what the API server fills in.
fn live(cp: &ControlPlane) -> Value {
    // The control plane's client runs on its own runtime.
    tokio::task::block_in_place(|| live_objects(cp))
}

fn live_objects(cp: &ControlPlane) -> Value {
    let client = cp.client().unwrap();
    let deployment = cp
        .block_on(Api::<Deployment>::namespaced(client.clone(), NS).get_opt("storefront"))
        .unwrap();
    let config = cp
        .block_on(Api::<ConfigMap>::namespaced(client.clone(), NS).get_opt("storefront-config"))
        .unwrap();
    let service = cp
        .block_on(Api::<Service>::namespaced(client, NS).get_opt("storefront"))
        .unwrap();
    json!({
        "deployment": deployment.map(|d| {
            let spec = d.spec.unwrap();
            json!({"replicas": spec.replicas, "template": spec.template, "labels": d.metadata.labels})
        }),
        "config": config.map(|c| c.data),
        "service": service.map(|s| {
            let spec = s.spec.unwrap();
            json!({"ports": spec.ports, "selector": spec.selector})
        }),
    })
}

fn release(stack: &Path, revision: u64) -> Release {
    LocalStore::new(stack.join(".kusion/state"))
        .release(revision)
        .unwrap_or_else(|e| panic!("release {revision}: {e}"))
}

/// What must be the same whichever front end applied.
fn recorded(r: &Release) -> Value {
    json!({
        "operation": r.operation,
        "status": r.status,
        "spec": r.spec,
        "steps": r.steps,
        "notes": r.notes,
        "holderOperation": r.holder.operation,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_console_and_cli_apply_the_same_release_on_a_real_cluster() {
    built("libkusion_runtime_kubernetes.so");
    let cp = tokio::task::spawn_blocking(ControlPlane::shared)
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let root = work.join("konfig");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/konfig"),
        &root,
    );
    let web = root.join("shop/base/web.k");
    let source = std::fs::read_to_string(&web).unwrap();
    std::fs::write(&web, source.replace("\"konfig-e2e\"", &format!("\"{NS}\""))).unwrap();
    let stack = root.join("shop/dev");
    let mut stack_yaml = std::fs::read_to_string(stack.join("stack.yaml")).unwrap();
    stack_yaml.push_str(&format!(
        "requireApproval: true\nkubeconfig: {}\ncontext: {}\nstate:\n  backend: local\n  path: .kusion/state\n",
        cp.kubeconfig_path().display(),
        cp.context()
    ));
    std::fs::write(stack.join("stack.yaml"), stack_yaml).unwrap();
    let cli = |args: &[&str]| {
        let out = kusionctl_in(&stack, &home).args(args).output().unwrap();
        assert!(out.status.success(), "kusionctl {args:?}: {}", text(&out));
        out
    };

    let mut command = kusionctl_in(&root, &home);
    command.args(["server", "--listen", "127.0.0.1:0"]);
    let server = ApiServer::start(command, &work.join("server.log"));
    let mint =
        |subject: &str, role: &str| server.mint(&server.admin, subject, json!({"shop": role}));
    let (alice, bob) = (mint("alice", "operator"), mint("bob", "approver"));

    // 1. The API: preview, apply, approval by a second person, progress watched to the end.
    let api = {
        let (server, alice, bob) = (&server, alice.clone(), bob.clone());
        tokio::task::block_in_place(move || {
            let ops = "/api/v1/projects/shop/stacks/dev/operations";
            let (code, body) = server.call(
                "POST",
                ops,
                &alice,
                Some(json!({"kind": "preview", "watch": true})),
            );
            assert_eq!(code, 400, "watch is for an apply: {body}");
            let (code, op) = server.call("POST", ops, &alice, Some(json!({"kind": "preview"})));
            assert_eq!(code, 202, "{op}");
            let preview = server.wait_for(&alice, op["id"].as_str().unwrap(), "succeeded");
            assert_eq!(preview["plan"]["summary"]["create"], 4, "{preview}");
            let (code, op) = server.call(
                "POST",
                ops,
                &alice,
                Some(json!({"kind": "apply", "watch": true})),
            );
            assert_eq!(code, 202, "{op}");
            let id = op["id"].as_str().unwrap().to_string();
            server.wait_for(&alice, &id, "awaiting_approval");
            let (code, body) = server.call(
                "POST",
                &format!("/api/v1/operations/{id}/approve"),
                &bob,
                None,
            );
            assert_eq!(code, 200, "{body}");
            let events = server.events(&alice, &id);
            let finished = events
                .iter()
                .filter(|e| e["type"] == "step_finished")
                .count();
            assert_eq!(finished, 4, "{events:?}");
            // Watched: the Deployment's health streamed until it was ready.
            let deployment = "apps/v1:Deployment:three-front-ends:storefront";
            let healths: Vec<&str> = events
                .iter()
                .filter(|e| e["type"] == "watch" && e["id"] == deployment)
                .map(|e| e["health"].as_str().unwrap())
                .collect();
            assert_eq!(healths.last(), Some(&"ready"), "{events:?}");
            assert_eq!(events.last().unwrap()["status"], "succeeded", "{events:?}");
            let done = server.wait_for(&alice, &id, "succeeded");
            done["revision"].as_u64().expect("a release")
        })
    };
    let by_api = release(&stack, api);
    let objects = live(cp);
    assert!(!objects["deployment"].is_null(), "{objects}");
    tokio::task::block_in_place(|| cli(&["destroy", "--yes"]));
    assert!(live(cp)["deployment"].is_null());

    // 2. The console: the same steps in Chromium, by the same two people.
    let shots = Path::new(&built("kusionctl"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let driver = start_driver(&work.join("chromedriver.log"));
    let page = Page {
        client: browser(&driver, &work.join("chromium-profile")).await,
        shots,
        base: server.base.clone(),
        tokens: vec![server.admin.clone(), alice.clone(), bob.clone()],
    };
    page.go("").await;
    page.sign_in(&alice).await;
    page.click(STACK_LINK).await;
    page.wait_count("#graph svg.graph g.node", 4).await;
    page.click("#preview-button").await;
    page.wait_text("#op-status", "succeeded").await;
    page.wait_text("#plan", "4 create").await;
    page.shot("k8s-01-preview").await;
    page.go("#/stacks/shop/dev").await;
    page.click("#apply-button").await;
    page.wait_text("#op-status", "awaiting approval").await;
    let id = page.wait_text("#op-id", "-").await;
    page.sign_out().await;
    page.sign_in(&bob).await;
    page.click(STACK_LINK).await;
    page.click("#awaiting a.review-link").await;
    page.wait_text("#op-id", &id).await;
    page.click("#approve-button").await;
    page.wait_text("#op-status", "succeeded").await;
    page.wait_count("#events li.e-step_finished", 4).await;
    // The console's apply watches readiness too.
    page.wait_count("#events li.e-watch", 1).await;
    page.shot("k8s-02-applied").await;
    let link = page.wait_text("#release-link", "#").await;
    let console: u64 = link.trim_start_matches('#').parse().unwrap();
    let by_console = release(&stack, console);
    assert_eq!(live(cp), objects, "the console's apply made other objects");
    page.client.clone().close().await.unwrap();
    tokio::task::block_in_place(|| cli(&["destroy", "--yes"]));

    // 3. The command line.
    let started = Instant::now();
    tokio::task::block_in_place(|| cli(&["apply", "--yes", "--watch"]));
    assert!(started.elapsed() < Duration::from_secs(300));
    let by_cli = release(&stack, console + 2);
    assert_eq!(live(cp), objects, "the CLI's apply made other objects");

    assert_eq!(
        (api, console),
        (1, 3),
        "releases: API 1, destroy 2, console 3"
    );
    assert_eq!(
        recorded(&by_api),
        recorded(&by_console),
        "API and console differ"
    );
    assert_eq!(recorded(&by_api), recorded(&by_cli), "API and CLI differ");
    tokio::task::block_in_place(|| cli(&["destroy", "--yes"]));
}
