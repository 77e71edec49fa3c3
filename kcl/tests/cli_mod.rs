//! `kcl mod` through the binary, against real servers the tests start on 127.0.0.1: an OCI
//! registry (Debian's `docker-registry`, installed by scripts/setup.d/60-docker-registry.sh)
//! and a git server (`git daemon` over bare repositories). A server that cannot start fails
//! the test loudly.
//!
//! Quality bars covered: a package pushed by `kcl mod push` is pulled and used by another
//! project; a tampered artifact (in the registry, a moved git tag, vendor/) is refused; a
//! package laid out as upstream's tools publish it installs.
//!
//! Over 800 lines: one suite sharing the registry and git servers it starts; each test stands
//! alone.

#![cfg(feature = "registry")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kusion_kcl::pkg::oci::{self, Client};
use kusion_kcl::pkg::{LockFile, Settings};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16, child: &mut Child, what: &str, log: &Path) {
    let start = Instant::now();
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{what} exited ({status}) before listening on 127.0.0.1:{port}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if start.elapsed() > Duration::from_secs(30) {
            panic!(
                "{what} did not listen on 127.0.0.1:{port} within 30 s: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A throwaway OCI registry.
struct Registry {
    child: Child,
    host: String,
    _dir: tempfile::TempDir,
}

/// bcrypt of `s3cret-pass` for user `kcluser` (made once with `htpasswd -nbB`).
const HTPASSWD: &str = "kcluser:$2y$05$DSjAAf2gu9X8PEBxkUhceeNwTB81RuX6j6DIUVgFoHzgC9OvWsHfu\n";

/// How a test registry authenticates.
#[derive(Clone, Copy, PartialEq)]
enum Auth {
    None,
    /// htpasswd: Basic challenges.
    Basic,
    /// A token service: Bearer challenges (as ghcr.io and Docker Hub).
    Token,
}

impl Registry {
    fn start(auth: Auth) -> Registry {
        Self::start_with(auth, None)
    }

    fn start_with(auth: Auth, token: Option<&TokenServer>) -> Registry {
        let bin = which("docker-registry").unwrap_or_else(|| {
            panic!(
                "docker-registry is not installed: run scripts/setup.d/60-docker-registry.sh (scripts/test.sh does)"
            )
        });
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut conf = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: kcl-mod-test\n",
            dir.path().join("data").display()
        );
        if auth == Auth::Token {
            let t = token.expect("a token service");
            conf.push_str(&format!(
                "auth:\n  token:\n    realm: {}\n    service: {TOKEN_SERVICE}\n    issuer: {TOKEN_ISSUER}\n    rootcertbundle: {}\n",
                t.realm,
                t.bundle.display()
            ));
        }
        if auth == Auth::Basic {
            std::fs::write(dir.path().join("htpasswd"), HTPASSWD).unwrap();
            conf.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: kcl-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        let cfg = dir.path().join("config.yml");
        std::fs::write(&cfg, conf).unwrap();
        let log = dir.path().join("registry.log");
        let mut child = Command::new(bin)
            .arg("serve")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting docker-registry");
        wait_for_port(port, &mut child, "docker-registry", &log);
        Registry {
            child,
            host: format!("127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    /// A client for the test's own pushes (an unauthenticated registry).
    fn client(&self, home: &Path) -> Client {
        let s = Settings {
            pkg_path: home.join("cache"),
            default_registry: self.host.clone(),
            default_repo: "test".into(),
            plain_http: Some(true),
            credentials_file: home.join("none.json"),
        };
        Client::new(&s, &self.host).unwrap()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TOKEN_SERVICE: &str = "kcl-test-registry";
const TOKEN_ISSUER: &str = "kcl-test-issuer";

/// A token service for a registry's Bearer authentication: it checks the Basic credentials of
/// `kcluser`/`s3cret-pass` and answers with an ES256 JWT granting the scope asked for, signed by
/// a self-signed certificate the registry trusts (`rootcertbundle`).
struct TokenServer {
    realm: String,
    bundle: PathBuf,
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    _dir: tempfile::TempDir,
}

fn b64url(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

impl TokenServer {
    fn start() -> TokenServer {
        use base64::Engine;
        let dir = tempfile::tempdir().unwrap();
        let ck = rcgen::generate_simple_self_signed(vec!["kcl-test-issuer".to_string()]).unwrap();
        let bundle = dir.path().join("bundle.pem");
        std::fs::write(&bundle, ck.cert.pem()).unwrap();
        let x5c = base64::engine::general_purpose::STANDARD.encode(ck.cert.der());
        let rng = ring::rand::SystemRandom::new();
        let key = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &ck.signing_key.serialize_der(),
            &rng,
        )
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (stop2, requests2) = (stop.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                requests2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let req = String::from_utf8_lossy(&buf).into_owned();
                let path = req.split_whitespace().nth(1).unwrap_or("").to_string();
                let want = format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode("kcluser:s3cret-pass")
                );
                let authed = req.lines().any(|l| {
                    l.to_ascii_lowercase().starts_with("authorization:") && l[14..].trim() == want
                });
                let reply = if !authed {
                    "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_string()
                } else {
                    let query = path.split_once('?').map(|(_, q)| q).unwrap_or("");
                    let mut access = Vec::new();
                    for kv in query.split('&') {
                        if let Some(v) = kv.strip_prefix("scope=") {
                            let v = v
                                .replace("%3A", ":")
                                .replace("%2F", "/")
                                .replace("%2C", ",");
                            let parts: Vec<&str> = v.splitn(3, ':').collect();
                            if parts.len() == 3 {
                                access.push(serde_json::json!({
                                    "type": parts[0],
                                    "name": parts[1],
                                    "actions": parts[2].split(',').collect::<Vec<_>>(),
                                }));
                            }
                        }
                    }
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_secs();
                    let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [x5c]});
                    let claims = serde_json::json!({
                        "iss": TOKEN_ISSUER,
                        "sub": "kcluser",
                        "aud": TOKEN_SERVICE,
                        "exp": now + 300,
                        "nbf": now - 10,
                        "iat": now,
                        "jti": format!("t{now}"),
                        "access": access,
                    });
                    let signing_input = format!(
                        "{}.{}",
                        b64url(header.to_string().as_bytes()),
                        b64url(claims.to_string().as_bytes())
                    );
                    let sig = key
                        .sign(&ring::rand::SystemRandom::new(), signing_input.as_bytes())
                        .unwrap();
                    let body = serde_json::json!({"token": format!("{signing_input}.{}", b64url(sig.as_ref()))})
                        .to_string();
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        TokenServer {
            realm: format!("http://127.0.0.1:{port}/token"),
            bundle,
            port,
            stop,
            thread: Some(thread),
            requests,
            _dir: dir,
        }
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // wakes the accept loop so it sees the flag
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A `git daemon` serving the bare repositories under its folder.
struct GitServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl GitServer {
    fn start() -> GitServer {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let log = dir.path().join("daemon.log");
        // the daemon program itself: `git daemon` would run it as a child that outlives a kill
        let exec_path = Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("git is not installed");
        let daemon =
            Path::new(String::from_utf8_lossy(&exec_path.stdout).trim()).join("git-daemon");
        assert!(daemon.is_file(), "{} not found", daemon.display());
        let mut child = Command::new(daemon)
            .args([
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", dir.path().display()),
                &dir.path().display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting git daemon (is git installed?)");
        wait_for_port(port, &mut child, "git daemon", &log);
        GitServer { child, port, dir }
    }

    fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(prog))
        .find(|p| p.is_file())
}

/// A sandbox: its own HOME (Docker config), package cache and default registry.
struct Env {
    tmp: tempfile::TempDir,
    registry: String,
    cache: PathBuf,
}

impl Env {
    fn new(registry: &str) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        let cache = tmp.path().join("cache");
        Env {
            registry: registry.to_string(),
            cache,
            tmp,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn home(&self) -> PathBuf {
        self.path("home")
    }

    fn kcl(&self, dir: &Path, args: &[&str]) -> Output {
        std::fs::create_dir_all(dir).unwrap();
        Command::new(env!("CARGO_BIN_EXE_kcl"))
            .args(args)
            .current_dir(dir)
            .env("HOME", self.home())
            .env_remove("DOCKER_CONFIG")
            .env("KCL_PKG_PATH", &self.cache)
            .env("KPM_REG", &self.registry)
            .env("KPM_REPO", "test")
            .env_remove("OCI_REG_PLAIN_HTTP")
            .output()
            .unwrap()
    }

    /// Runs and expects success.
    fn ok(&self, dir: &Path, args: &[&str]) -> String {
        let o = self.kcl(dir, args);
        assert!(
            o.status.success(),
            "kcl {args:?} in {}: {}{}",
            dir.display(),
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    }

    fn docker_login(&self, host: &str, user: &str, pass: &str) {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        let d = self.home().join(".docker");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("config.json"),
            format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#),
        )
        .unwrap();
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const LIB_K: &str =
    "schema Greeting:\n    msg: str\n\ndefault_greeting = Greeting {msg = \"hello from mylib\"}\n";

/// `kcl mod init mylib --version V` with a library file.
fn make_lib(env: &Env, version: &str) -> PathBuf {
    let work = env.path("work");
    env.ok(&work, &["mod", "init", "mylib", "--version", version]);
    let lib = work.join("mylib");
    write(&lib.join("lib.k"), LIB_K);
    lib
}

/// A project using `mylib`.
fn make_app(env: &Env, name: &str) -> PathBuf {
    let work = env.path("work");
    env.ok(&work, &["mod", "init", name]);
    let app = work.join(name);
    write(
        &app.join("main.k"),
        "import mylib\n\nout = mylib.default_greeting.msg\n",
    );
    app
}

#[test]
fn a_pushed_package_is_pulled_and_used_by_another_project() {
    let reg = Registry::start(Auth::None);
    let env = Env::new(&reg.host);
    let lib = make_lib(&env, "0.1.0");
    let o = env.kcl(&lib, &["mod", "push"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("pushed [registry] {}/test/mylib:0.1.0", reg.host)),
        "{}",
        stderr(&o)
    );

    // upstream's artifact layout
    let c = reg.client(&env.home());
    let m = c.manifest("test/mylib", "0.1.0").unwrap();
    assert_eq!(m.json["artifactType"], oci::LAYER_MEDIA_TYPE);
    assert_eq!(m.json["config"]["mediaType"], oci::EMPTY_CONFIG_MEDIA_TYPE);
    assert_eq!(m.json["layers"][0]["mediaType"], oci::LAYER_MEDIA_TYPE);
    assert_eq!(
        m.json["layers"][0]["annotations"][oci::ANNOTATION_TITLE],
        "mylib_0.1.0.tar"
    );
    assert_eq!(m.annotation(oci::ANNOTATION_NAME), Some("mylib"));
    assert_eq!(m.annotation(oci::ANNOTATION_VERSION), Some("0.1.0"));
    let published_sum = m.annotation(oci::ANNOTATION_SUM).unwrap().to_string();
    assert!(m.annotation(oci::ANNOTATION_CREATED).is_some());

    // a version is published once
    let o = env.kcl(&lib, &["mod", "push"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("package version '0.1.0' already exists"),
        "{}",
        stderr(&o)
    );

    // another project adds it by name and version, locks it, and runs with it
    let app = make_app(&env, "app");
    let o = env.kcl(&app, &["mod", "add", "mylib:0.1.0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("add dependency 'mylib:0.1.0' successfully"),
        "{}",
        stderr(&o)
    );
    let kcl_mod = std::fs::read_to_string(app.join("kcl.mod")).unwrap();
    assert!(
        kcl_mod.contains("[dependencies]\nmylib = \"0.1.0\"\n"),
        "{kcl_mod}"
    );
    let lock = LockFile::load(&app).unwrap();
    let e = &lock.entries["mylib"];
    assert_eq!(
        (
            e.full_name.as_str(),
            e.reg.as_str(),
            e.repo.as_str(),
            e.oci_tag.as_str()
        ),
        ("mylib_0.1.0", reg.host.as_str(), "test/mylib", "0.1.0")
    );
    assert_eq!(e.sum, published_sum, "the lock records the publisher's sum");
    assert!(
        env.cache.join("mylib_0.1.0/lib.k").is_file(),
        "cached as upstream"
    );
    assert_eq!(env.ok(&app, &["run"]), "out: hello from mylib\n");
    assert_eq!(env.ok(&app, &["run", "main.k"]), "out: hello from mylib\n");

    // `kcl test` and `kcl lint` find it the same way
    write(
        &app.join("main_test.k"),
        "import mylib\n\ntest_greeting = lambda {\n    assert mylib.default_greeting.msg == \"hello from mylib\"\n}\n",
    );
    let out = env.ok(&app, &["test"]);
    assert!(out.contains("test_greeting"), "{out}");
    env.ok(&app, &["lint"]);

    // graph and metadata
    assert_eq!(env.ok(&app, &["mod", "graph"]), "app@0.0.1 mylib@0.1.0\n");
    let meta: serde_json::Value =
        serde_json::from_str(&env.ok(&app, &["mod", "metadata"])).unwrap();
    assert_eq!(
        meta["packages"]["mylib"]["manifest_path"],
        env.cache.join("mylib_0.1.0").display().to_string()
    );

    // the oci:// form, in a third project with an empty cache: `kcl run` downloads it
    let env2 = Env::new(&reg.host);
    let app2 = make_app(&env2, "app2");
    env2.ok(
        &app2,
        &[
            "mod",
            "add",
            &format!("oci://{}/test/mylib", reg.host),
            "--tag",
            "0.1.0",
        ],
    );
    let kcl_mod = std::fs::read_to_string(app2.join("kcl.mod")).unwrap();
    assert!(
        kcl_mod.contains(&format!(
            "mylib = {{ oci = \"oci://{}/test/mylib\", tag = \"0.1.0\" }}",
            reg.host
        )),
        "{kcl_mod}"
    );
    std::fs::remove_dir_all(&env2.cache).unwrap();
    let o = env2.kcl(&app2, &["run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "out: hello from mylib\n");
    assert!(stderr(&o).contains("downloading 'mylib'"), "{}", stderr(&o));
    let o = env2.kcl(&app2, &["run", "-q"]);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));

    // pull into upstream's layout
    env.ok(&env.path("pulled"), &["mod", "pull", "mylib:0.1.0"]);
    let pulled = env
        .path("pulled/oci")
        .join(&reg.host)
        .join("test/mylib/0.1.0");
    assert_eq!(
        std::fs::read_to_string(pulled.join("lib.k")).unwrap(),
        LIB_K
    );

    // vendor: offline builds with neither cache nor registry
    env.ok(&app, &["mod", "vendor"]);
    assert!(app.join("vendor/mylib_0.1.0/lib.k").is_file());
    std::fs::remove_dir_all(&env.cache).unwrap();
    let offline = Env {
        registry: "127.0.0.1:9".into(),
        cache: env.path("empty-cache"),
        tmp: tempfile::tempdir().unwrap(),
    };
    std::fs::create_dir_all(offline.home()).unwrap();
    assert_eq!(
        offline.ok(&app, &["run", "--vendor"]),
        "out: hello from mylib\n"
    );
    assert!(!offline.cache.exists(), "vendor mode touches no cache");
}

/// Replaces the package in the registry under the same tag: `lib.k` says something else, and
/// the manifest records `sum` (the old one for a clumsy attacker, the new one for a careful
/// one).
fn republish_tampered(c: &Client, host_sum: Option<&str>) -> String {
    let mut b = tar::Builder::new(Vec::new());
    for (name, text) in [
        (
            "kcl.mod",
            "[package]\nname = \"mylib\"\nedition = \"*\"\nversion = \"0.1.0\"\n\n",
        ),
        ("kcl.mod.lock", ""),
        (
            "lib.k",
            "schema Greeting:\n    msg: str\n\ndefault_greeting = Greeting {msg = \"hello from mallory\"}\n",
        ),
        ("main.k", "The_first_kcl_program = 'Hello World!'"),
    ] {
        let mut h = tar::Header::new_ustar();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, text.as_bytes()).unwrap();
    }
    let data = b.into_inner().unwrap();
    // the honest sum of the tampered content, as a careful attacker would record it
    let d = tempfile::tempdir().unwrap();
    tar::Archive::new(&data[..]).unpack(d.path()).unwrap();
    let real = kusion_kcl::pkg::hash_dir(d.path()).unwrap();
    let layer = c.push_blob("test/mylib", &data).unwrap();
    c.push_blob("test/mylib", b"{}").unwrap();
    let sum = host_sum.map(str::to_string).unwrap_or(real.clone());
    let m = oci::package_manifest(
        &layer,
        data.len(),
        "mylib_0.1.0.tar",
        &[
            (oci::ANNOTATION_NAME, "mylib".into()),
            (oci::ANNOTATION_VERSION, "0.1.0".into()),
            (oci::ANNOTATION_SUM, sum),
        ],
    );
    c.push_manifest("test/mylib", "0.1.0", &m).unwrap();
    real
}

#[test]
fn tampered_artifacts_are_refused() {
    let reg = Registry::start(Auth::None);
    let env = Env::new(&reg.host);
    let lib = make_lib(&env, "0.1.0");
    env.ok(&lib, &["mod", "push"]);
    let app = make_app(&env, "app");
    env.ok(&app, &["mod", "add", "mylib:0.1.0"]);
    let locked = LockFile::load(&app).unwrap().entries["mylib"].sum.clone();

    // a modified cache copy is not used: it is downloaded again and must match the lock
    let cached = env.cache.join("mylib_0.1.0/lib.k");
    std::fs::write(&cached, "default_greeting = {msg = \"edited\"}\n").unwrap();
    let o = env.kcl(&app, &["run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "out: hello from mylib\n");
    assert!(
        stderr(&o).contains("does not match kcl.mod.lock; downloading it again"),
        "{}",
        stderr(&o)
    );

    // the registry's copy replaced, its manifest still recording the publisher's sum
    let c = reg.client(&env.home());
    let tampered_sum = republish_tampered(&c, Some(&locked));
    std::fs::remove_dir_all(&env.cache).unwrap();
    let o = env.kcl(&app, &["run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).is_empty());
    let err = stderr(&o);
    assert!(
        err.contains("checksum mismatch for dependency 'mylib'")
            && err.contains("the package's manifest records sum")
            && err.contains("Refusing it"),
        "{err}"
    );
    assert!(
        !env.cache.join("mylib_0.1.0").exists(),
        "nothing refused is cached"
    );

    // ...and with a manifest recording the new content's sum: the lock refuses it
    republish_tampered(&c, None);
    let o = env.kcl(&app, &["run"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("records sum {locked}"))
            && err.contains(&format!("hashes to {tampered_sum}"))
            && err.contains("kcl.mod.lock"),
        "{err}"
    );
    assert!(!env.cache.join("mylib_0.1.0").exists());
    // the same for `kcl mod update`, which does not accept a changed artifact either
    let o = env.kcl(&app, &["mod", "update"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(LockFile::load(&app).unwrap().entries["mylib"].sum, locked);

    // a modified vendored copy is refused (vendor/ is the user's: it is not replaced)
    let env2 = Env::new(&reg.host);
    let app2 = make_app(&env2, "app2");
    std::fs::write(
        app2.join("kcl.mod"),
        "[package]\nname = \"app2\"\nversion = \"0.0.1\"\n\n[dependencies]\nmylib = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::write(
        app2.join("kcl.mod.lock"),
        LockFile::load(&app).unwrap().to_text(),
    )
    .unwrap();
    let v = app2.join("vendor/mylib_0.1.0");
    write(
        &v.join("kcl.mod"),
        "[package]\nname = \"mylib\"\nedition = \"*\"\nversion = \"0.1.0\"\n\n",
    );
    write(&v.join("lib.k"), LIB_K.replace("mylib", "vendor").as_str());
    let o = env2.kcl(&app2, &["run", "--vendor"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("checksum mismatch for dependency 'mylib'")
            && stderr(&o).contains(&v.display().to_string()),
        "{}",
        stderr(&o)
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn git_dependencies_from_a_git_server() {
    let srv = GitServer::start();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("gitlib");
    write(
        &src.join("kcl.mod"),
        "[package]\nname = \"gitlib\"\nversion = \"0.2.0\"\n",
    );
    write(&src.join("lib.k"), "answer = 42\n");
    git(&src, &["init", "-q", "-b", "main"]);
    git(&src, &["add", "."]);
    git(&src, &["commit", "-qm", "v0.2.0"]);
    git(&src, &["tag", "v0.2.0"]);
    let commit = git(&src, &["rev-parse", "HEAD"]);
    git(
        work.path(),
        &[
            "clone",
            "-q",
            "--bare",
            src.to_str().unwrap(),
            srv.dir.path().join("gitlib.git").to_str().unwrap(),
        ],
    );
    let url = srv.url("gitlib.git");
    let env = Env::new("127.0.0.1:9");
    env.ok(&env.path("work"), &["mod", "init", "app"]);
    let app = env.path("work/app");
    write(&app.join("main.k"), "import gitlib\n\nv = gitlib.answer\n");
    env.ok(&app, &["mod", "add", &url, "--tag", "v0.2.0"]);
    let kcl_mod = std::fs::read_to_string(app.join("kcl.mod")).unwrap();
    assert!(
        kcl_mod.contains(&format!("gitlib = {{ git = \"{url}\", tag = \"v0.2.0\" }}")),
        "{kcl_mod}"
    );
    let e = LockFile::load(&app).unwrap().entries["gitlib"].clone();
    assert_eq!(
        (e.url.as_str(), e.git_tag.as_str(), e.full_name.as_str()),
        (url.as_str(), "v0.2.0", "gitlib_v0.2.0")
    );
    assert!(!env.cache.join("gitlib_v0.2.0/.git").exists());
    assert_eq!(env.ok(&app, &["run"]), "v: 42\n");

    // by commit, with --git
    env.ok(&env.path("work"), &["mod", "init", "app2"]);
    let app2 = env.path("work/app2");
    write(&app2.join("main.k"), "import gitlib\n\nv = gitlib.answer\n");
    env.ok(&app2, &["mod", "add", "--git", &url, "--commit", &commit]);
    assert_eq!(env.ok(&app2, &["run"]), "v: 42\n");
    assert_eq!(
        env.ok(&app2, &["mod", "graph"]),
        format!("app2@0.0.1 gitlib@{commit}\n")
    );

    // the tag moved to other content on the server: refused against the lock
    write(&src.join("lib.k"), "answer = 666\n");
    git(&src, &["commit", "-qam", "moved"]);
    git(&src, &["tag", "-f", "v0.2.0"]);
    git(
        &src,
        &[
            "push",
            "-q",
            "--force",
            srv.dir.path().join("gitlib.git").to_str().unwrap(),
            "refs/tags/v0.2.0",
        ],
    );
    std::fs::remove_dir_all(&env.cache).unwrap();
    let o = env.kcl(&app, &["run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("checksum mismatch for dependency 'gitlib'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn registry_credentials_come_from_the_docker_config() {
    let reg = Registry::start(Auth::Basic);
    let env = Env::new(&reg.host);
    let lib = make_lib(&env, "0.3.0");
    let o = env.kcl(&lib, &["mod", "push"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!(
            "registry {} requires a login and there are no credentials for it",
            reg.host
        )),
        "{}",
        stderr(&o)
    );
    env.docker_login(&reg.host, "kcluser", "wrong");
    let o = env.kcl(&lib, &["mod", "push"]);
    assert!(
        stderr(&o).contains("refused the credentials of user 'kcluser'"),
        "{}",
        stderr(&o)
    );
    env.docker_login(&reg.host, "kcluser", "s3cret-pass");
    env.ok(&lib, &["mod", "push"]);
    let app = make_app(&env, "app");
    env.ok(&app, &["mod", "add", "mylib"]);
    let kcl_mod = std::fs::read_to_string(app.join("kcl.mod")).unwrap();
    assert!(
        kcl_mod.contains("mylib = \"0.3.0\""),
        "the newest version is written: {kcl_mod}"
    );
    assert_eq!(env.ok(&app, &["run"]), "out: hello from mylib\n");
}

#[test]
fn bearer_token_registries_get_a_token_with_the_docker_config_credentials() {
    let tokens = TokenServer::start();
    let reg = Registry::start_with(Auth::Token, Some(&tokens));
    let env = Env::new(&reg.host);
    let lib = make_lib(&env, "0.4.0");
    let o = env.kcl(&lib, &["mod", "push"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!(
            "registry {} requires a login and there are no credentials for it",
            reg.host
        )),
        "{}",
        stderr(&o)
    );
    env.docker_login(&reg.host, "kcluser", "s3cret-pass");
    env.ok(&lib, &["mod", "push"]);
    let app = make_app(&env, "app");
    std::fs::remove_dir_all(&env.cache).ok();
    env.ok(&app, &["mod", "add", "mylib:0.4.0"]);
    assert_eq!(env.ok(&app, &["run"]), "out: hello from mylib\n");
    assert!(
        tokens.requests.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "tokens were asked for"
    );
}

/// A package shaped as upstream kpm published them before image-spec 1.1 (config media type
/// = the layer's, no annotations) with a tarball as Go's `archive/tar` writes kpm's `TarDir`
/// (a `.` entry, folders without a trailing slash): it installs and its sum is recorded.
#[test]
fn packages_laid_out_by_upstream_tools_install() {
    let reg = Registry::start(Auth::None);
    let env = Env::new(&reg.host);
    let mut b = tar::Builder::new(Vec::new());
    let entries: [(&str, Option<&str>); 5] = [
        (".", None),
        (
            "kcl.mod",
            Some("[package]\nname = \"helloworld\"\nedition = \"v0.9.0\"\nversion = \"0.1.4\"\n\n"),
        ),
        ("main.k", Some("The_first_kcl_program = 'Hello World!'")),
        ("sub", None),
        ("sub/sub.k", Some("x = 1\n")),
    ];
    for (name, text) in entries {
        let mut h = tar::Header::new_gnu();
        match text {
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                h.set_cksum();
                b.append_data(&mut h, name, std::io::empty()).unwrap();
            }
            Some(t) => {
                h.set_mode(0o644);
                h.set_size(t.len() as u64);
                h.set_cksum();
                b.append_data(&mut h, name, t.as_bytes()).unwrap();
            }
        }
    }
    let data = b.into_inner().unwrap();
    let c = reg.client(&env.home());
    let layer = c.push_blob("test/helloworld", &data).unwrap();
    let config = c.push_blob("test/helloworld", b"{}").unwrap();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": oci::MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": oci::LAYER_MEDIA_TYPE, "digest": config, "size": 2},
        "layers": [{
            "mediaType": oci::LAYER_MEDIA_TYPE,
            "digest": layer,
            "size": data.len(),
            "annotations": {"org.opencontainers.image.title": "helloworld_0.1.4.tar"}
        }]
    });
    c.push_manifest(
        "test/helloworld",
        "0.1.4",
        &serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let app = env.path("work/app");
    env.ok(&env.path("work"), &["mod", "init", "app"]);
    write(
        &app.join("main.k"),
        "import helloworld.sub\n\ntotal = sub.x + 1\n",
    );
    let o = env.kcl(&app, &["mod", "add", "helloworld"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = LockFile::load(&app).unwrap().entries["helloworld"].clone();
    assert_eq!(e.version, "0.1.4", "the newest tag");
    assert_eq!(
        e.sum,
        kusion_kcl::pkg::hash_dir(&env.cache.join("helloworld_0.1.4")).unwrap()
    );
    assert_eq!(env.ok(&app, &["run"]), "total: 2\n");
}

#[test]
fn local_dependencies_and_clear_errors() {
    let env = Env::new("127.0.0.1:9");
    let work = env.path("work");
    env.ok(&work, &["mod", "init", "base"]);
    write(&work.join("base/base.k"), "name = \"base\"\n");
    env.ok(&work, &["mod", "init", "app"]);
    let app = work.join("app");
    // comments and layout of kcl.mod survive `kcl mod add`
    let original =
        "# the app\n[package]\nname = \"app\" # its name\nedition = \"*\"\nversion = \"0.0.1\"\n";
    std::fs::write(app.join("kcl.mod"), original).unwrap();
    write(
        &app.join("main.k"),
        "import base\n\nbase_name = base.name\n",
    );
    env.ok(&app, &["mod", "add", "../base"]);
    let text = std::fs::read_to_string(app.join("kcl.mod")).unwrap();
    assert_eq!(
        text,
        format!("{original}\n[dependencies]\nbase = {{ path = \"../base\" }}\n")
    );
    assert_eq!(env.ok(&app, &["run"]), "base_name: base\n");
    assert_eq!(env.ok(&app, &["mod", "graph"]), "app@0.0.1 base@0.0.1\n");

    // adding itself, or a package the registry cannot give, leaves kcl.mod alone
    let o = env.kcl(&app, &["mod", "add", "."]);
    assert!(
        stderr(&o).contains("cannot add 'app' as a dependency to itself"),
        "{}",
        stderr(&o)
    );
    let o = env.kcl(&app, &["mod", "add", "nothere:1.0.0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("adding dependency 'nothere'"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(app.join("kcl.mod")).unwrap(), text);

    // a bad kcl.mod entry is reported at its line and column
    std::fs::write(
        app.join("kcl.mod"),
        "[package]\nname = \"app\"\n\n[dependencies]\nbase = { git = \"u\", tag = \"a\", commit = \"b\" }\n",
    )
    .unwrap();
    let o = env.kcl(&app, &["run"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!(
            "{}:5:1: dependency 'base': only one of branch, tag or commit is allowed",
            app.join("kcl.mod").display()
        )),
        "{}",
        stderr(&o)
    );
    // a missing path
    std::fs::write(
        app.join("kcl.mod"),
        "[package]\nname = \"app\"\n\n[dependencies]\nbase = { path = \"../nope\" }\n",
    )
    .unwrap();
    let o = env.kcl(&app, &["run"]);
    assert!(
        stderr(&o).contains("dependency 'base': path '../nope'")
            && stderr(&o).contains("is not a folder"),
        "{}",
        stderr(&o)
    );
    // a registry that is not there: the dependency and the registry are named
    std::fs::write(
        app.join("kcl.mod"),
        "[package]\nname = \"app\"\n\n[dependencies]\nk8s = \"1.28\"\n",
    )
    .unwrap();
    let o = env.kcl(&app, &["run"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot reach registry 127.0.0.1:9"),
        "{}",
        stderr(&o)
    );
}

/// Upstream's Konfig stacks run with `kcl run` alone (kcl.mod's profile and dependencies),
/// their vendored `k8s` checked against the checksum upstream's kpm recorded in kcl.mod.lock.
#[test]
#[ignore = "needs the shared corpus (../shared or $KUSION_SHARED); .ci/corpus.sh runs it"]
fn konfig_stacks_resolve_with_upstreams_lock_sums() {
    let shared = std::env::var_os("KUSION_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    let corpus = shared.join("conformance/konfig");
    assert!(
        corpus.join("kcl.mod").is_file(),
        "{} missing",
        corpus.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let konfig = tmp.path().join("konfig");
    let o = Command::new("cp")
        .args(["-r", corpus.to_str().unwrap(), konfig.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    let env = Env::new("127.0.0.1:9");
    let mut checked = 0;
    for stack in [
        "examples/appops/http-echo/dev",
        "examples/server/app_rbac/prod",
    ] {
        let dir = konfig.join(stack);
        if !dir.join("expected.yaml").is_file() {
            continue;
        }
        let out = env.ok(&dir, &["run"]);
        let mut got: Vec<&str> = out.lines().collect();
        let expected = std::fs::read_to_string(dir.join("expected.yaml")).unwrap();
        let mut want: Vec<&str> = expected.lines().collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{stack}");
        checked += 1;
    }
    assert!(checked > 0, "no stack with an expected output");
    // the vendored package hashes to upstream's sum; one changed byte is refused
    let readme = konfig.join("vendor/k8s/README.md");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&readme)
        .unwrap();
    f.write_all(b"\n").unwrap();
    let o = env.kcl(&konfig.join("examples/appops/http-echo/dev"), &["run"]);
    assert_eq!(o.status.code(), Some(1));
    let mut err = String::new();
    o.stderr.as_slice().read_to_string(&mut err).unwrap();
    assert!(
        err.contains("records sum xBZgPsnpVVyWBpahuPQHReeRx28eUHGFoaPeqbct+vs="),
        "{err}"
    );
}
