//! The web console in a real browser for end-to-end tests: Debian's chromium, headless, driven
//! through chromedriver (WebDriver) with fantoccini. Without `/usr/bin/chromium` and
//! `/usr/bin/chromedriver` (`scripts/setup.d/95-chromium.sh`) a test fails, it never skips.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

/// How long a page may take to show what a test waits for.
pub const WAIT: Duration = Duration::from_secs(90);

/// chromedriver on 127.0.0.1, stopped with the test.
pub struct Driver {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // chromedriver leads its own process group, with the chromium it started in it: a test
        // that fails before closing its session must not leave a browser running. The group is
        // signalled only when it is chromedriver's own and not this process's (never a broader
        // kill).
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: getpgid, getpgrp and killpg take plain integers and touch no memory of ours.
        unsafe {
            let group = libc::getpgid(pid);
            if pid > 1 && group == pid && group != libc::getpgrp() {
                libc::killpg(group, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool(env: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    assert!(
        path.is_file(),
        "{} is missing: install Debian's chromium and chromium-driver \
         (scripts/setup.d/95-chromium.sh) or set {env}",
        path.display()
    );
    path
}

/// Starts chromedriver (`$CHROMEDRIVER`, else Debian's) on a free port, its log in `log`.
pub fn start_driver(log: &Path) -> Driver {
    let binary = tool("CHROMEDRIVER", "/usr/bin/chromedriver");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(&binary)
        .process_group(0)
        .arg(format!("--port={port}"))
        .arg(format!("--log-path={}", log.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "chromedriver exited ({status}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver never listened on 127.0.0.1:{port}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// A headless chromium session (`$CHROMIUM`, else Debian's) with its profile in `profile`.
pub async fn browser(driver: &Driver, profile: &Path) -> Client {
    let chromium = tool("CHROMIUM", "/usr/bin/chromium");
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1360,1700",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("a chromium session through chromedriver: {e}"))
}

/// The browser, and where its pictures go.
pub struct Page {
    pub client: Client,
    /// Where screenshots go.
    pub shots: PathBuf,
    /// The server's `http://127.0.0.1:PORT`.
    pub base: String,
    /// Every token used: none may ever appear in a URL.
    pub tokens: Vec<String>,
}

impl Page {
    pub async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {}", path.display());
    }

    /// Keeps a picture and the page's markup of a failed wait, and fails.
    pub async fn fail(&self, message: String) {
        self.shot("failure").await;
        let source = self.client.source().await.unwrap_or_default();
        panic!("{message}\npage source:\n{source}");
    }

    /// The first element matching `css` once its text contains `want`.
    pub async fn wait_text(&self, css: &str, want: &str) -> String {
        let deadline = Instant::now() + WAIT;
        let mut last = String::new();
        loop {
            if let Ok(e) = self.client.find(Locator::Css(css)).await
                && let Ok(text) = e.text().await
            {
                if text.contains(want) {
                    return text;
                }
                last = text;
            }
            if Instant::now() > deadline {
                self.fail(format!("{css} never showed {want:?} (last: {last:?})"))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every element matching `css`, once there are at least `n`.
    pub async fn wait_count(&self, css: &str, n: usize) -> Vec<fantoccini::elements::Element> {
        let deadline = Instant::now() + WAIT;
        loop {
            let found = self
                .client
                .find_all(Locator::Css(css))
                .await
                .unwrap_or_default();
            if found.len() >= n {
                return found;
            }
            if Instant::now() > deadline {
                self.fail(format!("fewer than {n} of {css}: {}", found.len()))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the element; the console re-renders views as events arrive, so an element found
    /// and replaced before the click is found again (until the wait runs out).
    pub async fn click(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let e = self
                .client
                .wait()
                .at_most(WAIT)
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css}: {e}"));
            match e.click().await {
                Ok(_) => return,
                Err(err)
                    if err.to_string().contains("stale element") && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => panic!("clicking {css}: {err}"),
            }
        }
    }

    pub async fn go(&self, fragment: &str) {
        self.client
            .goto(&format!("{}/ui/{fragment}", self.base))
            .await
            .unwrap();
        self.check_url().await;
    }

    /// The token lives in sessionStorage and headers only, never in the address.
    pub async fn check_url(&self) {
        let url = self.client.current_url().await.unwrap();
        for t in &self.tokens {
            assert!(
                !url.as_str().contains(t.as_str()),
                "a token in the URL {url}"
            );
        }
    }

    pub async fn sign_in(&self, token: &str) {
        let input = self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css("#signin #token"))
            .await
            .unwrap();
        input.send_keys(token).await.unwrap();
        self.click("#signin-button").await;
        let deadline = Instant::now() + WAIT;
        while self.client.find(Locator::Css("#subject")).await.is_err() {
            if Instant::now() > deadline {
                self.fail("never signed in".into()).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.check_url().await;
        let stored = self
            .client
            .execute(
                "return [sessionStorage.getItem('kusion.token'), localStorage.length, document.cookie]",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(stored, json!([token, 0, ""]), "kept in this tab only");
    }

    pub async fn sign_out(&self) {
        self.click("#signout").await;
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css("#signin #token"))
            .await
            .unwrap();
    }

    pub async fn text_of(&self, id: &str) -> String {
        self.client
            .execute(
                "return document.getElementById(arguments[0])?.textContent ?? ''",
                vec![json!(id)],
            )
            .await
            .unwrap()
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}
