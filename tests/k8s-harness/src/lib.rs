//! A real Kubernetes control plane for tests: etcd + kube-apiserver + kube-controller-manager
//! v1.20.2 on loopback with free ports, its own CA and token, and a fake kubelet that plays the
//! node (binds pods, writes their status, injects failures on request).
//!
//! Every process is started by this crate and killed by exact PID when the [`ControlPlane`] is
//! dropped (also while unwinding from a panic). Children are additionally spawned with
//! `PR_SET_PDEATHSIG`, so a shared control plane kept in a `static` dies with the test process.

mod kubelet;
mod process;
mod tls;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use kubelet::{FAULT_ANNOTATION, FakeKubelet, Fault};
use process::Proc;

/// Everything that can go wrong while bringing a control plane up.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(
        "{what} not found at {path}: run `bash scripts/k8s/build-control-plane.sh` \
         (or scripts/test.sh) to build/install it"
    )]
    MissingBinary { what: &'static str, path: PathBuf },
    #[error("cannot start {name}: {source}")]
    Spawn {
        name: String,
        source: std::io::Error,
    },
    #[error("{name} exited early ({status}); last log lines:\n{log_tail}")]
    Exited {
        name: String,
        status: String,
        log_tail: String,
    },
    #[error("{what} not ready after {waited:?}; last apiserver log lines:\n{log_tail}")]
    Timeout {
        what: String,
        waited: Duration,
        log_tail: String,
    },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("tls material: {0}")]
    Tls(String),
    #[error("kubernetes client: {0}")]
    Kube(String),
}

pub type Result<T, E = HarnessError> = std::result::Result<T, E>;

/// What to start.
#[derive(Debug, Clone)]
pub struct Options {
    /// Run kube-controller-manager (Deployment/ReplicaSet/Job/... controllers, GC, namespaces).
    pub controller_manager: bool,
    /// Run the fake kubelet (a Node that binds and "runs" pods).
    pub fake_kubelet: bool,
    /// How long to wait for `/readyz`.
    pub ready_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            controller_manager: true,
            fake_kubelet: true,
            ready_timeout: Duration::from_secs(90),
        }
    }
}

/// Where the cached control-plane build lives (see scripts/k8s/build-control-plane.sh).
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUSION_K8S_BIN") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("KUSION_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/root"));
            home.join(".cache/kusion-rs")
        });
    cache.join("k8s-v1.20.2/bin")
}

/// The `kubectl` built from the same Debian source as the server (the oracle of the
/// differential tests); `KUSION_KUBECTL` overrides it.
pub fn kubectl_path() -> Result<PathBuf> {
    let path = std::env::var_os("KUSION_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| bin_dir().join("kubectl"));
    if path.is_file() {
        Ok(path)
    } else {
        Err(HarnessError::MissingBinary {
            what: "kubectl",
            path,
        })
    }
}

fn find_etcd() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("KUSION_ETCD") {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file())
        .ok_or(HarnessError::MissingBinary {
            what: "etcd",
            path: PathBuf::from("$PATH"),
        })
}

/// A free TCP port on 127.0.0.1 (the kernel picks it; a collision with a concurrent run is
/// possible but rare, and `start` retries when a process fails to bind).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running control plane. Drop it to stop every process it started.
pub struct ControlPlane {
    // Field order matters for drop: the kubelet task and runtime stop before the processes,
    // the processes before their directory is removed.
    kubelet: Option<FakeKubelet>,
    runtime: tokio::runtime::Runtime,
    procs: Vec<Proc>,
    server: String,
    token: String,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server", &self.server)
            .field("dir", &self.dir.path())
            .finish()
    }
}

const CONTEXT: &str = "kusion-harness";

/// PIDs and directory of the shared control plane, for the exit hook (statics are never dropped).
static SHARED_CLEANUP: std::sync::Mutex<Option<(Vec<u32>, PathBuf)>> = std::sync::Mutex::new(None);

extern "C" fn cleanup_shared() {
    let Ok(mut slot) = SHARED_CLEANUP.lock() else {
        return;
    };
    if let Some((pids, dir)) = slot.take() {
        for pid in pids.into_iter().rev() {
            // SAFETY: signalling and reaping our own children by their exact PIDs.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
        if std::env::var_os("KUSION_K8S_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl ControlPlane {
    /// Start etcd, kube-apiserver, kube-controller-manager and the fake kubelet.
    pub fn start() -> Result<ControlPlane> {
        Self::start_with(Options::default())
    }

    /// A control plane shared by every test of one test binary (each test should work in its
    /// own namespace). Started on first use; killed when the test process exits.
    pub fn shared() -> &'static ControlPlane {
        static SHARED: OnceLock<std::result::Result<ControlPlane, String>> = OnceLock::new();
        match SHARED.get_or_init(|| {
            let cp = ControlPlane::start().map_err(|e| e.to_string())?;
            if let Ok(mut slot) = SHARED_CLEANUP.lock() {
                *slot = Some((
                    cp.pids().into_iter().map(|(_, p)| p).collect(),
                    cp.dir().to_path_buf(),
                ));
            }
            // SAFETY: registering a plain `extern "C"` function with no captured state.
            unsafe { libc::atexit(cleanup_shared) };
            Ok(cp)
        }) {
            Ok(cp) => cp,
            Err(e) => panic!("the shared test control plane could not start: {e}"),
        }
    }

    pub fn start_with(options: Options) -> Result<ControlPlane> {
        let mut last = None;
        // Ports are picked before the processes bind them; retry when another run took one.
        for _ in 0..3 {
            match Self::try_start(&options) {
                Ok(cp) => return Ok(cp),
                Err(e @ HarnessError::Exited { .. })
                    if e.to_string().contains("address already in use") =>
                {
                    tracing::warn!(
                        "port collision while starting the control plane, retrying: {e}"
                    );
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("loop ran at least once"))
    }

    fn try_start(options: &Options) -> Result<ControlPlane> {
        let bins = bin_dir();
        let apiserver_bin = bins.join("kube-apiserver");
        let kcm_bin = bins.join("kube-controller-manager");
        if !apiserver_bin.is_file() {
            return Err(HarnessError::MissingBinary {
                what: "kube-apiserver",
                path: apiserver_bin,
            });
        }
        if options.controller_manager && !kcm_bin.is_file() {
            return Err(HarnessError::MissingBinary {
                what: "kube-controller-manager",
                path: kcm_bin,
            });
        }
        let etcd_bin = find_etcd()?;

        let dir = tempfile::Builder::new().prefix("kusion-k8s-").tempdir()?;
        let root = dir.path();
        let pki = root.join("pki");
        std::fs::create_dir_all(&pki)?;
        std::fs::create_dir_all(root.join("logs"))?;
        let material = tls::generate().map_err(|e| HarnessError::Tls(e.to_string()))?;
        let write = |name: &str, text: &str| -> Result<PathBuf> {
            let p = pki.join(name);
            std::fs::write(&p, text)?;
            Ok(p)
        };
        let ca = write("ca.crt", &material.ca_cert)?;
        let cert = write("apiserver.crt", &material.server_cert)?;
        let key = write("apiserver.key", &material.server_key)?;
        let sa_key = write("sa.key", &material.sa_key)?;
        let sa_pub = write("sa.pub", &material.sa_pub)?;
        let token = material.token.clone();
        let tokens = write(
            "tokens.csv",
            &format!("{token},admin,admin,system:masters\n"),
        )?;

        let etcd_client = free_port()?;
        let etcd_peer = free_port()?;
        let api_port = free_port()?;
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = root.join("kubeconfig");
        std::fs::write(&kubeconfig, render_kubeconfig(&server, &ca, &token))?;

        let mut procs = Vec::new();
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        procs.push(Proc::spawn(
            "etcd",
            &etcd_bin,
            &[
                "--name=harness".into(),
                format!("--data-dir={}", root.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=harness={peer_url}"),
                "--unsafe-no-fsync".into(),
                "--log-level=warn".into(),
            ],
            &root.join("logs/etcd.log"),
        )?);
        procs.push(Proc::spawn(
            "kube-apiserver",
            &apiserver_bin,
            &[
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={api_port}"),
                "--insecure-port=0".into(),
                format!("--etcd-servers={etcd_url}"),
                format!("--tls-cert-file={}", cert.display()),
                format!("--tls-private-key-file={}", key.display()),
                format!("--client-ca-file={}", ca.display()),
                format!("--token-auth-file={}", tokens.display()),
                "--authorization-mode=RBAC".into(),
                "--anonymous-auth=false".into(),
                "--service-account-issuer=https://kubernetes.default.svc".into(),
                format!("--service-account-signing-key-file={}", sa_key.display()),
                format!("--service-account-key-file={}", sa_pub.display()),
                "--service-cluster-ip-range=10.0.0.0/24".into(),
                // No kubelets exist to reconcile the `kubernetes` service endpoints.
                "--endpoint-reconciler-type=none".into(),
                // The ServiceAccount admission plugin waits for token controllers we do not run.
                "--disable-admission-plugins=ServiceAccount".into(),
                format!("--cert-dir={}", root.join("certs").display()),
                "--profiling=false".into(),
                "--v=1".into(),
            ],
            &root.join("logs/apiserver.log"),
        )?);

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("k8s-harness")
            .enable_all()
            .build()?;
        let mut cp = ControlPlane {
            kubelet: None,
            runtime,
            procs,
            server,
            token,
            kubeconfig,
            dir,
        };
        cp.wait_ready(options.ready_timeout)?;

        if options.controller_manager {
            let kcm = Proc::spawn(
                "kube-controller-manager",
                &kcm_bin,
                &[
                    format!("--kubeconfig={}", cp.kubeconfig.display()),
                    "--bind-address=127.0.0.1".into(),
                    "--secure-port=0".into(),
                    "--port=0".into(),
                    "--leader-elect=false".into(),
                    "--use-service-account-credentials=false".into(),
                    "--controllers=deployment,replicaset,statefulset,daemonset,job,cronjob,garbagecollector,\
                     namespace,endpoint,endpointslice"
                        .into(),
                    format!("--service-account-private-key-file={}", sa_key.display()),
                    "--concurrent-deployment-syncs=4".into(),
                    "--concurrent-replicaset-syncs=4".into(),
                    "--v=1".into(),
                ],
                &cp.dir.path().join("logs/kcm.log"),
            )?;
            cp.procs.push(kcm);
            // Give it a moment to fail on bad flags before anyone relies on it.
            std::thread::sleep(Duration::from_millis(300));
            cp.check_alive()?;
        }
        if options.fake_kubelet {
            let client = cp.client()?;
            let kubelet = cp
                .runtime
                .block_on(FakeKubelet::start(client, cp.runtime.handle().clone()))?;
            cp.kubelet = Some(kubelet);
        }
        tracing::info!(server = %cp.server, "control plane ready");
        Ok(cp)
    }

    fn check_alive(&mut self) -> Result<()> {
        for p in &mut self.procs {
            p.check_alive()?;
        }
        Ok(())
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        let client = self.client()?;
        loop {
            self.check_alive()?;
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("static request is valid");
            let answer = self.runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), client.request_text(req)).await
            });
            // `/readyz` can answer before the bootstrap controller has created the `default`
            // namespace; tests (and users) expect it, so it is part of "ready" here.
            if let Ok(Ok(body)) = answer
                && body.trim() == "ok"
            {
                let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
                    kube::Api::all(client.clone());
                if let Ok(Ok(Some(_))) = self.runtime.block_on(async {
                    tokio::time::timeout(Duration::from_secs(5), namespaces.get_opt("default"))
                        .await
                }) {
                    return Ok(());
                }
            }
            if start.elapsed() > timeout {
                let log_tail = self
                    .procs
                    .iter()
                    .find(|p| p.name == "kube-apiserver")
                    .map(|p| p.log_tail(30));
                return Err(HarnessError::Timeout {
                    what: format!("kube-apiserver at {}", self.server),
                    waited: timeout,
                    log_tail: log_tail.unwrap_or_default(),
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The bearer token of the `system:masters` user.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A kubeconfig file with one context ([`ControlPlane::context`]) pointing at this server.
    /// `kubectl --kubeconfig <this plane>`, ready for more arguments.
    pub fn kubectl(&self) -> Result<std::process::Command> {
        let mut cmd = std::process::Command::new(kubectl_path()?);
        cmd.arg("--kubeconfig").arg(self.kubeconfig_path());
        Ok(cmd)
    }

    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    pub fn context(&self) -> &'static str {
        CONTEXT
    }

    /// Directory holding the logs (`logs/*.log`), PKI and etcd data of this control plane.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The PIDs of the processes this control plane started.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.procs
            .iter()
            .map(|p| (p.name.clone(), p.pid()))
            .collect()
    }

    /// The harness's own tokio runtime (clients from [`ControlPlane::client`] live on it).
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.runtime
    }

    /// Run a future on the harness runtime (for test helpers written with `kube`).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// A kube client for this control plane, bound to the harness runtime.
    pub fn client(&self) -> Result<kube::Client> {
        let path = self.kubeconfig.clone();
        self.runtime.block_on(async move {
            let kc = kube::config::Kubeconfig::read_from(&path)
                .map_err(|e| HarnessError::Kube(e.to_string()))?;
            let config = kube::Config::from_custom_kubeconfig(
                kc,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| HarnessError::Kube(e.to_string()))?;
            kube::Client::try_from(config).map_err(|e| HarnessError::Kube(e.to_string()))
        })
    }

    /// The fake kubelet, if it was started.
    pub fn kubelet(&self) -> Option<&FakeKubelet> {
        self.kubelet.as_ref()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(k) = self.kubelet.take() {
            k.stop();
        }
        // Reverse start order: controller-manager, apiserver, etcd.
        while let Some(mut p) = self.procs.pop() {
            p.kill();
        }
        if std::env::var_os("KUSION_K8S_KEEP").is_some() {
            let kept = std::mem::replace(&mut self.dir, tempfile::TempDir::new().expect("tmp dir"));
            eprintln!("kept control plane files in {}", kept.keep().display());
        }
    }
}

fn render_kubeconfig(server: &str, ca: &Path, token: &str) -> String {
    // JSON is valid YAML; serde_json quotes every value correctly.
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": CONTEXT, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT}}],
        "current-context": CONTEXT,
    });
    serde_json::to_string_pretty(&doc).expect("plain JSON value serializes")
}
