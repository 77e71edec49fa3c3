//! The web console in a real browser: Debian's chromium, headless, driven through chromedriver
//! (WebDriver) from Rust with fantoccini, against a real `kusionctl server` (the testbed build
//! with the fake-cloud runtime) on a Konfig stack that requires approval. A person signs in
//! with a pasted token, sees the stacks, opens one (graph drawn, the findings of a KCL policy
//! set through the in-repo `kcl-policy` plugin, drift),
//! previews, asks for an apply, signs in as a second person and approves it, watches its
//! progress live, opens the release it recorded, and compares releases 1 and 2. Screenshots of
//! each page are kept under `<target>/console-screenshots/`. The release the console shows is
//! the one the API serves, the one on disk and the one `kusionctl apply` records.
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (`scripts/setup.d/95-chromium.sh`):
//! without them the test fails, it never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::Locator;
use kusion_kernel::state::{LocalStore, Release, StateStore};
use kusion_tests::api_server::ApiServer;
use kusion_tests::chromium::{Page, WAIT, browser, start_driver};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kusionctl-testbed");
const DEV_LINK: &str = "tr.stack-row[data-stack='inv/dev'] a.stack-link";

/// `inv/prod`: a wider graph (fan-out and fan-in over three layers) for the layout.
const PROD_K: &str = r#"resources = [
    {id = "t:net", type = "Test", attributes = {size = 1}}
    {id = "t:web", type = "Test", attributes = {size = 1}, dependsOn = ["t:net"]}
    {id = "t:api", type = "Test", attributes = {size = 1}, dependsOn = ["t:net"]}
    {id = "t:worker", type = "Test", attributes = {size = 1}, dependsOn = ["t:net"]}
    {id = "t:lb", type = "Test", attributes = {size = 1}, dependsOn = ["t:web"]}
    {id = "t:db", type = "Test", attributes = {size = 1}, dependsOn = ["t:api", "t:worker"]}
]
"#;

/// Reads an operation's events with the console's `streamEvents`, the first connection cut
/// right after its first event (as a dropped network would): `{seqs, calls}`, the events' IDs
/// as received and the `Last-Event-ID` each request sent.
const RESUME_JS: &str = r#"
const [id, done] = arguments;
(async () => {
  const { streamEvents } = await import("/ui/api.js");
  const realFetch = window.fetch;
  const calls = [];
  window.fetch = async (url, init) => {
    const response = await realFetch(url, init);
    if (!String(url).endsWith("/events")) return response;
    calls.push(init.headers["Last-Event-ID"] || null);
    if (calls.length > 1) return response;
    const reader = response.body.getReader();
    let text = "";
    let cut = false;
    const body = new ReadableStream({
      async pull(controller) {
        if (cut) return controller.error(new TypeError("network cut"));
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return controller.close();
          text += new TextDecoder().decode(value);
          const end = text.indexOf("\n\n");
          if (end >= 0) {
            cut = true;
            reader.cancel();
            return controller.enqueue(new TextEncoder().encode(text.slice(0, end + 2)));
          }
        }
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  const seqs = [];
  try {
    await streamEvents(id, (e) => seqs.push(Number(e.id)));
    done({ seqs, calls });
  } catch (e) {
    done({ error: String(e), seqs, calls });
  } finally {
    window.fetch = realFetch;
  }
})();
"#;

/// `t:web` takes 2.5 s to apply, so its progress can be seen while it runs.
fn main_k(web_size: u32) -> String {
    format!(
        r#"resources = [
    {{
        id = "t:web"
        type = "Test"
        attributes = {{size = {web_size}, delayMs = 2500, stack = option("stack")}}
    }}
    {{
        id = "t:db"
        type = "Test"
        attributes = {{size = 2}}
        dependsOn = ["t:web"]
    }}
]
"#
    )
}

/// `ROOT/kcl.mod`, project `inv`, stack `inv/dev` requiring approval.
fn layout(root: &Path) -> PathBuf {
    let stack = root.join("inv/dev");
    std::fs::create_dir_all(&stack).unwrap();
    std::fs::write(root.join("kcl.mod"), "[package]\nname = \"served\"\n").unwrap();
    std::fs::write(root.join("inv/project.yaml"), "name: inv\n").unwrap();
    std::fs::write(
        stack.join("stack.yaml"),
        "name: dev\ndescription: the inventory service\nrequireApproval: true\n",
    )
    .unwrap();
    std::fs::write(
        stack.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(stack.join("main.k"), main_k(1)).unwrap();
    let prod = root.join("inv/prod");
    std::fs::create_dir_all(&prod).unwrap();
    std::fs::write(prod.join("stack.yaml"), "name: prod\n").unwrap();
    std::fs::write(
        prod.join("kcl.yaml"),
        "kcl_cli_configs:\n  files:\n    - main.k\n",
    )
    .unwrap();
    std::fs::write(prod.join("main.k"), PROD_K).unwrap();
    stack
}

/// A KCL policy set for every stack, through `HOME/.kusion/config.toml` and the in-repo
/// `kcl-policy` plugin (its library in this build's output): resources without an `owner`
/// get a warning, a `size` over 10 is denied.
fn policies(home: &Path) {
    kusion_tests::cli::built(&kusion_kernel::plugin::dylib_file_name("kusion-policy-kcl"));
    // The testbed server finds the policy plugin where an installation keeps it.
    kusion_tests::cli::stage_plugins();
    let set = home.join("policies/sizes");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::write(
        set.join("policy.toml"),
        "name = \"sizes\"\nversion = \"1.0.0\"\n\n[rules.MaxSize]\nseverity = \"deny\"\ntypes = [\"Test\"]\n\n[rules.HasOwner]\nseverity = \"warn\"\ntypes = [\"Test\"]\n",
    )
    .unwrap();
    std::fs::write(
        set.join("rules.k"),
        "rule MaxSize:\n    resource.attributes.size <= 10, \"size ${resource.attributes.size} is over the limit of 10\"\n\nrule HasOwner:\n    resource.attributes?.owner, \"no owner\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join(".kusion")).unwrap();
    std::fs::write(
        home.join(".kusion/config.toml"),
        "[policy]\ntimeout = \"60s\"\n\n[policy.plugins.kcl-policy]\nconfig = { sets = [\"../policies/sizes\"] }\n",
    )
    .unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_previews_approves_watches_and_compares_in_chromium() {
    let started = Instant::now();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let home = work.join("home");
    std::fs::create_dir_all(&home).unwrap();
    policies(&home);
    let root = work.join("served");
    let stack = layout(&root);
    let log = work.join("server.log");
    let mut server_cmd = command(&root, &home, &work.join("cloud-server"));
    server_cmd.args(["server", "--listen", "127.0.0.1:0", "-vv"]);
    let server = ApiServer::start(server_cmd, &log);
    let admin = server.admin.clone();
    let mint = |subject: &str, role: &str| server.mint(&admin, subject, json!({"inv": role}));
    let alice = mint("alice", "operator");
    let bob = mint("bob", "approver");

    let shots = Path::new(BIN)
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    eprintln!("screenshots in {}", shots.display());
    let driver = start_driver(&work.join("chromedriver.log"));
    let client = browser(&driver, &work.join("chromium-profile")).await;
    let page = Page {
        client,
        shots,
        base: server.base.clone(),
        tokens: vec![admin.clone(), alice.clone(), bob.clone()],
    };
    let ready = started.elapsed();

    // Sign in with a pasted token; the stacks list with last release and drift.
    page.go("").await;
    page.shot("00-sign-in").await;
    page.sign_in(&alice).await;
    page.wait_text("#subject", "alice").await;
    // Any Content-Security-Policy violation from here on (the pages below are drawn without
    // reloading this document) is collected and must not happen.
    page.client
        .execute(
            "window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI)); return true",
            vec![],
        )
        .await
        .unwrap();
    page.wait_text("tr.stack-row[data-stack='inv/dev']", "dev")
        .await;
    page.wait_text("tr.stack-row[data-stack='inv/dev'] .last-release", "none")
        .await;
    page.wait_text("tr.stack-row[data-stack='inv/dev'] .drift-status", "empty")
        .await;
    page.shot("01-stacks").await;

    // The stack: its graph drawn, policy findings, drift.
    page.click(DEV_LINK).await;
    let nodes = page.wait_count("#graph svg.graph g.node", 2).await;
    assert_eq!(nodes.len(), 2);
    assert_eq!(
        page.client
            .find_all(Locator::Css("#graph svg.graph path.edge"))
            .await
            .unwrap()
            .len(),
        1
    );
    let web_x = page
        .client
        .execute(
            "return [...document.querySelectorAll('#graph g.node')].map(g => [g.dataset.id, g.transform.baseVal[0].matrix.e])",
            vec![],
        )
        .await
        .unwrap();
    let xs: std::collections::BTreeMap<String, f64> =
        serde_json::from_value::<Vec<(String, f64)>>(web_x)
            .unwrap()
            .into_iter()
            .collect();
    assert!(
        xs["t:web"] < xs["t:db"],
        "laid out by layers, dependency first: {xs:?}"
    );
    page.wait_text("#policy-section", "kcl-policy").await;
    let warned = page.wait_count("#policy-section tr.finding", 2).await;
    assert!(warned[0].text().await.unwrap().contains("no owner"));
    page.wait_text("#drift-section", "empty").await;
    page.shot("02-stack").await;

    // A preview.
    page.click("#preview-button").await;
    page.wait_text("#op-status", "succeeded").await;
    page.wait_text("#plan", "2 create").await;
    page.wait_text("#plan .resource-diff[data-id='t:web']", "size")
        .await;
    page.wait_text("#op-policy", "HasOwner").await;
    page.shot("03-preview").await;

    // An apply: planned, then waiting for a second person.
    page.go("#/stacks/inv/dev").await;
    page.click("#apply-button").await;
    page.wait_text("#op-status", "awaiting approval").await;
    let id = page.wait_text("#op-id", "-").await;
    page.wait_text("#decision", "Approve").await;
    page.shot("04-awaiting-approval").await;
    // Alice may not approve (an operator, and the requester): the page says why beforehand.
    page.wait_text("#decision-note", "approver role").await;
    let approve = page
        .client
        .find(Locator::Css("#approve-button"))
        .await
        .unwrap();
    assert_eq!(
        approve.attr("disabled").await.unwrap().as_deref(),
        Some("true")
    );

    // Bob signs in and approves; the progress streams in while the apply runs.
    page.sign_out().await;
    page.sign_in(&bob).await;
    // From the stack page, where the operation waiting for a decision is pointed out.
    page.click(DEV_LINK).await;
    page.wait_text("#awaiting", "wait for approval").await;
    page.click("#awaiting a.review-link").await;
    page.wait_text("#op-id", &id).await;
    page.check_url().await;
    page.wait_text("#op-status", "awaiting approval").await;
    assert!(
        page.client
            .find(Locator::Css("#decision-note"))
            .await
            .is_err(),
        "bob may approve"
    );
    page.click("#approve-button").await;
    let deadline = Instant::now() + WAIT;
    let mut seen_running = false;
    loop {
        let status = page.text_of("op-status").await;
        let started_web = page
            .client
            .find_all(Locator::Css("#events li.e-step_started"))
            .await
            .unwrap()
            .len();
        if status.contains("running") && started_web > 0 {
            seen_running = true;
            page.shot("05-applying-live").await;
            break;
        }
        if status.contains("succeeded") || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        seen_running,
        "a step's start was shown while the apply was still running"
    );
    page.wait_text("#op-status", "succeeded").await;
    page.wait_text("#events", "stream ended").await;
    let events = page.text_of("events").await;
    for expected in [
        "t:web Create started",
        "t:db Create succeeded",
        "approved by bob",
    ] {
        assert!(events.contains(expected), "{expected:?} in {events}");
    }
    page.wait_text("#progress-text", "2 of 2").await;
    let states = page
        .client
        .execute(
            "return [...document.querySelectorAll('#graph g.node')].map(g => g.dataset.state)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(states, json!(["succeeded", "succeeded"]));
    page.wait_text("#approved-by", "bob").await;
    page.shot("06-applied").await;

    // The console's event reader survives a dropped connection: the page's own module reads
    // the stream again with the network cut after the first event; it resumes with
    // Last-Event-ID and gets every event once, in order.
    let resumed = page
        .client
        .execute_async(RESUME_JS, vec![json!(id)])
        .await
        .unwrap();
    let total = page
        .client
        .find_all(Locator::Css("#events li[data-seq]"))
        .await
        .unwrap()
        .len() as u64;
    assert_eq!(
        resumed,
        json!({"seqs": (1..=total).collect::<Vec<u64>>(), "calls": [null, "1"]}),
        "resumed after the cut"
    );

    // The release the console shows is the one the API serves, and the one on disk.
    page.click("#release-link").await;
    page.wait_text("#release-status", "succeeded").await;
    page.wait_count("#graph svg.graph g.node[data-state='succeeded']", 2)
        .await;
    page.shot("07-release-1").await;
    let shown: Value = serde_json::from_str(&page.text_of("release-json").await).unwrap();
    let (code, served) = server.call(
        "GET",
        "/api/v1/projects/inv/stacks/dev/releases/1",
        &bob,
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(shown, served, "the console shows the API's release record");
    let on_disk = LocalStore::new(stack.join(".kusion/state"))
        .release(1)
        .unwrap();
    let shown: Release = serde_json::from_value(shown).unwrap();
    assert_eq!(shown, on_disk);

    // The same stack through `kusionctl apply` records the same release.
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
    assert_eq!(shown.operation, by_cli.operation);
    assert_eq!(shown.status, by_cli.status);
    assert_eq!(shown.spec, by_cli.spec, "the same spec recorded");
    assert_eq!(shown.steps, by_cli.steps, "the same steps recorded");

    // Release 2 with a changed field, then releases 1 and 2 compared in the history.
    std::fs::write(stack.join("main.k"), main_k(3)).unwrap();
    let (code, op) = server.call(
        "POST",
        "/api/v1/projects/inv/stacks/dev/operations",
        &alice,
        Some(json!({"kind": "apply"})),
    );
    assert_eq!(code, 202, "{op}");
    let second = op["id"].as_str().unwrap().to_string();
    server.wait_for(&alice, &second, "awaiting_approval");
    let (code, body) = server.call(
        "POST",
        &format!("/api/v1/operations/{second}/approve"),
        &bob,
        None,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(server.wait_for(&alice, &second, "succeeded")["revision"], 2);
    // A day-2 run refused before acting, recorded as kusionctl run records it, is listed.
    {
        use kusion_kernel::ops::record;
        let store = kusion_kernel::state::LocalStore::new(stack.join(".kusion/state"));
        let ops = kusion_kernel::ops::OpsSpec::from_output(&json!({"operations": [
            {"name": "restart", "kind": "Restart", "targets": ["east/v1:Pod:inv:web-1"]}
        ]}))
        .unwrap();
        let mut run = record::new_record(
            &ops,
            "AppRecovery.k",
            vec!["app=web".into()],
            kusion_kernel::state::LeaseHolder::current("run"),
        );
        let refused = [(
            "restart".to_string(),
            "east/v1:Pod:inv:web-1".to_string(),
            "not found".to_string(),
        )];
        record::record_refused(
            &store,
            &mut run,
            &ops,
            "1 target(s) cannot be acted on",
            &refused,
        )
        .unwrap();
    }
    page.go("#/stacks/inv/dev").await;
    page.wait_count("#history tr.release-row", 2).await;
    let run = page.wait_text("#runs tr.run-row", "AppRecovery.k").await;
    assert!(
        run.contains("failed") && run.contains("refused") && run.contains("app=web"),
        "{run}"
    );
    let from = page
        .client
        .find(Locator::Css("#compare-from"))
        .await
        .unwrap();
    from.select_by_value("1").await.unwrap();
    let to = page.client.find(Locator::Css("#compare-to")).await.unwrap();
    to.select_by_value("2").await.unwrap();
    page.shot("08-history").await;
    page.click("#compare-button").await;
    let row = page
        .wait_text(
            "#comparison .resource-diff[data-id='t:web'] tr[data-path='attributes.size']",
            "3",
        )
        .await;
    assert!(
        row.contains("attributes.size") && row.contains('1') && row.contains('3'),
        "{row}"
    );
    page.wait_text("#comparison", "0 added, 1 changed, 0 removed, 1 unchanged")
        .await;
    assert!(
        page.client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .ends_with("#/stacks/inv/dev/compare/1/2")
    );
    page.shot("09-compare-1-2").await;

    // Bob asks for a destroy himself (the browser asks him to confirm first): he may not
    // approve his own operation, the page says so, and he rejects it; nothing is destroyed.
    page.go("#/stacks/inv/dev").await;
    page.click("#destroy-button").await;
    let question = page.client.get_alert_text().await.unwrap();
    assert!(question.contains("inv/dev"), "{question}");
    page.client.accept_alert().await.unwrap();
    page.wait_text("#op-status", "awaiting approval").await;
    page.wait_text("#plan", "2 delete").await;
    page.wait_text("#decision-note", "You asked for this operation")
        .await;
    let approve = page
        .client
        .find(Locator::Css("#approve-button"))
        .await
        .unwrap();
    assert_eq!(
        approve.attr("disabled").await.unwrap().as_deref(),
        Some("true")
    );
    page.click("#reject-button").await;
    page.wait_text("#op-status", "rejected").await;
    page.wait_text("#events", "rejected by bob").await;
    page.shot("10-destroy-rejected").await;
    // He asks again and thinks better of it: cancelling a waiting operation changes nothing.
    page.go("#/stacks/inv/dev").await;
    page.click("#destroy-button").await;
    page.client.accept_alert().await.unwrap();
    page.wait_text("#op-status", "awaiting approval").await;
    page.click("#cancel-button").await;
    page.wait_text("#op-status", "cancelled").await;
    page.wait_text("#cancelled-by", "bob").await;
    page.wait_text("#events", "cancelled by bob; nothing changed")
        .await;
    let (_, releases) = server.call(
        "GET",
        "/api/v1/projects/inv/stacks/dev/releases",
        &bob,
        None,
    );
    assert_eq!(releases.as_array().unwrap().len(), 2, "{releases}");

    assert_eq!(
        page.client
            .execute("return window.__csp", vec![])
            .await
            .unwrap(),
        json!([]),
        "no Content-Security-Policy violation on any page"
    );

    // What the console's reads cost (debug build, the machine shared): 20 calls each.
    for view in [
        "graph",
        "graph?revision=1",
        "releases/compare?from=1&to=2",
        "policy",
        "drift",
    ] {
        let mut took = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            let (code, body) = server.call(
                "GET",
                &format!("/api/v1/projects/inv/stacks/dev/{view}"),
                &bob,
                None,
            );
            assert_eq!(code, 200, "{view}: {body}");
            took.push(t.elapsed());
        }
        took.sort();
        eprintln!("GET {view} x20: p50 {:?}, max {:?}", took[10], took[19]);
    }

    // The drift column sees the fake cloud changed behind kusion's back.
    let web_file = std::fs::read_dir(work.join("cloud-server"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("t_web-")
        })
        .unwrap();
    let mut object: Value = serde_json::from_slice(&std::fs::read(&web_file).unwrap()).unwrap();
    object["attributes"]["size"] = 9.into();
    std::fs::write(&web_file, object.to_string()).unwrap();
    page.go("").await;
    page.wait_text("tr.stack-row[data-stack='inv/dev'] .last-release", "#2")
        .await;
    page.wait_text(
        "tr.stack-row[data-stack='inv/dev'] .drift-status",
        "drifted",
    )
    .await;
    page.shot("11-stacks-drifted").await;

    // A wider graph: a column per layer, no two nodes on one spot, every edge drawn.
    page.click("tr.stack-row[data-stack='inv/prod'] a.stack-link")
        .await;
    page.wait_count("#graph svg.graph g.node", 6).await;
    let laid = page
        .client
        .execute(
            "return [...document.querySelectorAll('#graph g.node')].map(g => [g.dataset.id, g.transform.baseVal[0].matrix.e, g.transform.baseVal[0].matrix.f])",
            vec![],
        )
        .await
        .unwrap();
    let laid: Vec<(String, f64, f64)> = serde_json::from_value(laid).unwrap();
    let x = |id: &str| laid.iter().find(|n| n.0 == id).unwrap().1;
    assert!(x("t:net") < x("t:web") && x("t:web") == x("t:api") && x("t:api") == x("t:worker"));
    assert!(
        x("t:worker") < x("t:db") && x("t:lb") == x("t:db"),
        "{laid:?}"
    );
    let spots: std::collections::BTreeSet<(i64, i64)> =
        laid.iter().map(|n| (n.1 as i64, n.2 as i64)).collect();
    assert_eq!(spots.len(), 6, "{laid:?}");
    assert_eq!(
        page.client
            .find_all(Locator::Css("#graph svg.graph path.edge"))
            .await
            .unwrap()
            .len(),
        6
    );
    page.wait_text("#policy-section", "HasOwner").await;
    page.shot("12-wide-graph").await;
    page.check_url().await;

    let took = started.elapsed();
    page.client.close().await.unwrap();
    drop(driver);
    drop(server);
    eprintln!("browser ready after {ready:?}; whole walk {took:?}");
    let logged = std::fs::read_to_string(&log).unwrap();
    for t in [&admin, &alice, &bob] {
        assert!(!logged.contains(t.as_str()), "a token in the server's log");
    }
}
