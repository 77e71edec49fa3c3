//! Fault campaign over every state write point: an apply (creates, then updates and deletes)
//! whose k-th write to the state store fails — before anything is stored (a full disk, a
//! refused connection), after it was stored but before the caller learns it (a connection
//! dropped before the reply), or, on the local store, torn half-way (a crash or full disk
//! mid-write). After each fault a clean apply must converge: the stack is never lost or
//! bricked, nothing is created twice, nothing is orphaned, no release stays `running`.
//! Runs over the local store (every write point), PostgreSQL and S3 (moto); for the two network
//! backends also through a proxy that cuts the connection at a byte of a request or of a reply.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use kusion_kernel::execute::ApplyOptions;
use kusion_kernel::operation::{self, Applied, Stack};
use kusion_kernel::plan::PlanOptions;
use kusion_kernel::registry::Registry;
use kusion_kernel::spec::Spec;
use kusion_kernel::state::{
    self, JournalRecord, Lease, LeaseHolder, Release, ReleaseStatus, State, StateError, StateStore,
};
use kusion_pg_harness::PgServer;
use kusion_test_runtime::TestRuntime;
use kusion_tests::proxy::{CuttingProxy, Direction};
use kusion_tests::servers::MotoServer;
use kusion_tests::stores::{self, Opener};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Nothing stored, an error returned.
    Before,
    /// Stored, then an error returned.
    After,
    /// Half of a journal write stored, then the process dies: every later write fails too
    /// (local store only; a torn write from a live process is cut off by the store itself).
    Torn,
}

/// A store whose `fail_at`-th write fails as `kind` (counting appends, checkpoints, release
/// writes and lease changes); `fail_at == 0` only counts.
struct Faulty {
    inner: Arc<dyn StateStore>,
    journal: Option<PathBuf>,
    fail_at: usize,
    kind: Kind,
    writes: AtomicUsize,
    dead: AtomicBool,
}

impl Faulty {
    fn fault<T>(&self, write: impl FnOnce() -> Result<T, StateError>) -> Result<T, StateError> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if self.dead.load(Ordering::SeqCst) {
            return Err(StateError::Io {
                location: self.inner.location(),
                message: "the process died".into(),
            });
        }
        if n != self.fail_at {
            return write();
        }
        if self.kind == Kind::Torn {
            self.dead.store(true, Ordering::SeqCst);
        }
        let injected = || StateError::Io {
            location: self.inner.location(),
            message: format!("injected fault ({:?}) at write {n}", self.kind),
        };
        match self.kind {
            Kind::Before | Kind::Torn => Err(injected()),
            Kind::After => {
                write()?;
                Err(injected())
            }
        }
    }
}

impl StateStore for Faulty {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn load(&self) -> Result<State, StateError> {
        self.inner.load()
    }
    fn append(&self, lease: &Lease, records: &[JournalRecord]) -> Result<(), StateError> {
        let n = self.writes.load(Ordering::SeqCst) + 1;
        if n == self.fail_at
            && self.kind == Kind::Torn
            && !self.dead.load(Ordering::SeqCst)
            && let Some(journal) = &self.journal
        {
            // The first half of the lines this write would have made, then the error.
            let mut bytes = Vec::new();
            for r in records {
                serde_json::to_writer(&mut bytes, r).unwrap();
                bytes.push(b'\n');
            }
            bytes.truncate(bytes.len() / 2);
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(journal)
                .unwrap()
                .write_all(&bytes)
                .unwrap();
        }
        self.fault(|| self.inner.append(lease, records))
    }
    fn checkpoint(&self, lease: &Lease, state: &State) -> Result<(), StateError> {
        self.fault(|| self.inner.checkpoint(lease, state))
    }
    fn journal_len(&self) -> Result<u64, StateError> {
        self.inner.journal_len()
    }
    fn acquire_lease(&self, holder: &LeaseHolder, ttl_ms: u64) -> Result<Lease, StateError> {
        self.fault(|| self.inner.acquire_lease(holder, ttl_ms))
    }
    fn renew_lease(&self, lease: &Lease, ttl_ms: u64) -> Result<Lease, StateError> {
        self.inner.renew_lease(lease, ttl_ms)
    }
    fn release_lease(&self, lease: &Lease) -> Result<(), StateError> {
        self.fault(|| self.inner.release_lease(lease))
    }
    fn force_unlock(&self) -> Result<Option<Lease>, StateError> {
        self.inner.force_unlock()
    }
    fn current_lease(&self) -> Result<Option<Lease>, StateError> {
        self.inner.current_lease()
    }
    fn create_release(&self, release: &mut Release) -> Result<u64, StateError> {
        self.fault(|| self.inner.create_release(release))
    }
    fn update_release(&self, release: &Release) -> Result<(), StateError> {
        self.fault(|| self.inner.update_release(release))
    }
    fn releases(&self) -> Result<Vec<Release>, StateError> {
        self.inner.releases()
    }
    fn release(&self, revision: u64) -> Result<Release, StateError> {
        self.inner.release(revision)
    }
    fn latest_revision(&self) -> Result<Option<u64>, StateError> {
        self.inner.latest_revision()
    }
}

const N: usize = 8;

/// Generation 1 creates N resources (with references between them); generation 2 updates
/// most, deletes two and adds one.
fn spec(generation: usize) -> Spec {
    let mut s = String::from("resources:\n");
    let ids: Vec<usize> = if generation == 1 {
        (0..N).collect()
    } else {
        (2..N + 1).collect()
    };
    for i in ids {
        s.push_str(&format!(
            "- id: t:r{i}\n  type: Test\n  attributes:\n    index: {i}\n    generation: {generation}\n"
        ));
        if i >= 3 {
            s.push_str(&format!("    parent: $kusion_path[t:r{}].uid\n", i - 1));
        }
    }
    Spec::parse(&s, "faults.yaml").unwrap()
}

fn apply(stack: &Stack, spec: &Spec) -> Result<Applied, operation::OperationError> {
    operation::apply(
        spec,
        stack,
        "apply",
        &PlanOptions::default(),
        &ApplyOptions::default(),
        Vec::new(),
        |_| true,
        None,
        Arc::new(AtomicBool::new(false)),
    )
}

/// The lease left by a faulty apply (its release failed) belongs to a live process (this one):
/// a later "process" of the campaign would wait for it to expire; the test removes it, as an
/// operator would after the process ended.
fn unlock_if_left(store: &dyn StateStore) {
    let _ = store.force_unlock();
}

fn assert_converged(
    store: Arc<dyn StateStore>,
    registry: &Registry,
    cloud: &Path,
    spec: &Spec,
    what: &str,
) {
    let stack = Stack {
        store: store.clone(),
        registry: registry.clone(),
    };
    match apply(&stack, spec) {
        Ok(Applied::Done { report, .. }) => assert!(report.succeeded(), "{what}: {report:?}"),
        Ok(Applied::NothingToDo(_)) => {}
        Ok(other) => panic!("{what}: {other:?}"),
        Err(e) => panic!("{what}: the clean apply failed: {e}"),
    }
    let preview = operation::preview(
        spec,
        &stack,
        &PlanOptions::default(),
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(!preview.has_changes(), "{what}: not converged: {preview:?}");
    let state = store.load().unwrap();
    let mut in_state: Vec<&str> = state.resources.keys().map(String::as_str).collect();
    let mut wanted: Vec<&str> = spec.resources.iter().map(|r| r.id.as_str()).collect();
    in_state.sort();
    wanted.sort();
    assert_eq!(in_state, wanted, "{what}: state");
    let mut objects: Vec<String> = TestRuntime::objects(cloud)
        .into_iter()
        .map(|o| o.id)
        .collect();
    objects.sort();
    assert_eq!(
        objects, wanted,
        "{what}: orphans or missing objects in the cloud"
    );
    let log = std::fs::read_to_string(cloud.join("creations.log")).unwrap_or_default();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for id in log.lines() {
        *counts.entry(id).or_default() += 1;
    }
    assert!(
        counts.values().all(|n| *n == 1),
        "{what}: created more than once: {counts:?}"
    );
    let report = state::check::check(&*store);
    assert!(!report.has_errors(), "{what}: {report:?}");
    for r in store.releases().unwrap() {
        assert_ne!(
            r.status,
            ReleaseStatus::Running,
            "{what}: release {} left running",
            r.revision
        );
    }
}

/// Counts the writes of one clean apply of `spec` on top of what `prepare` leaves.
fn campaign(open: &Opener<'_>, kinds: &[Kind], every: usize, label: &str) -> usize {
    let registry_for = |cloud: &Path| {
        let mut r = Registry::new();
        r.register(Arc::new(TestRuntime::with_dir(cloud))).unwrap();
        r
    };
    let mut faults = 0;
    let mut stack_no = 0;
    for generation in [1, 2] {
        // How many writes does this step make?
        let counted = {
            stack_no += 1;
            let dir = tempfile::tempdir().unwrap();
            let registry = registry_for(&dir.path().join("cloud"));
            let inner = open(&format!("{label}-count-{stack_no}"));
            if generation == 2 {
                assert_converged(
                    inner.clone(),
                    &registry,
                    &dir.path().join("cloud"),
                    &spec(1),
                    "setup",
                );
            }
            let faulty = Arc::new(Faulty {
                inner,
                journal: None,
                fail_at: 0,
                kind: Kind::Before,
                writes: AtomicUsize::new(0),
                dead: AtomicBool::new(false),
            });
            let stack = Stack {
                store: faulty.clone(),
                registry,
            };
            apply(&stack, &spec(generation)).unwrap();
            faulty.writes.load(Ordering::SeqCst)
        };
        for k in (1..=counted).step_by(every.max(1)) {
            for &kind in kinds {
                stack_no += 1;
                let what = format!("{label} generation {generation} write {k}/{counted} {kind:?}");
                let dir = tempfile::tempdir().unwrap();
                let cloud = dir.path().join("cloud");
                let registry = registry_for(&cloud);
                let name = format!("{label}-{stack_no}");
                let inner = open(&name);
                if generation == 2 {
                    assert_converged(inner.clone(), &registry, &cloud, &spec(1), "setup");
                }
                let journal = inner
                    .location()
                    .parse::<PathBuf>()
                    .ok()
                    .map(|d| d.join("journal.jsonl"))
                    .filter(|_| kind == Kind::Torn);
                let faulty = Arc::new(Faulty {
                    inner,
                    journal,
                    fail_at: k,
                    kind,
                    writes: AtomicUsize::new(0),
                    dead: AtomicBool::new(false),
                });
                let stack = Stack {
                    store: faulty.clone(),
                    registry: registry.clone(),
                };
                // It may fail or (for a fault in a write whose failure is only logged) succeed.
                let _ = apply(&stack, &spec(generation));
                faults += 1;
                // The next "process" opens the store afresh.
                let next = open(&name);
                unlock_if_left(&*next);
                assert_converged(next, &registry, &cloud, &spec(generation), &what);
            }
        }
    }
    faults
}

#[test]
fn faults_at_every_local_write_point_converge() {
    let dir = tempfile::tempdir().unwrap();
    let n = campaign(
        &stores::local(dir.path()),
        &[Kind::Before, Kind::After, Kind::Torn],
        1,
        "local",
    );
    eprintln!("local: {n} faults injected, all converged");
    assert!(n > 30, "{n}");
}

#[test]
fn faults_on_postgres_converge() {
    let pg =
        PgServer::start().unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"));
    let url = pg.url();
    let n = campaign(
        &stores::postgres(&url),
        &[Kind::Before, Kind::After],
        1,
        "pg",
    );
    eprintln!("postgres: {n} faults injected, all converged");
}

#[test]
fn faults_on_s3_converge() {
    let moto = MotoServer::start();
    moto.create_bucket("kusion-faults");
    let n = campaign(
        &stores::s3(&moto, "kusion-faults"),
        &[Kind::Before, Kind::After],
        2,
        "s3",
    );
    eprintln!("s3: {n} faults injected, all converged");
}

/// Opens a stack's store for a faulty "process"; the network may fail while opening, too.
type TryOpener<'a> = dyn Fn(&str) -> Result<Arc<dyn StateStore>, StateError> + Sync + 'a;

/// The network fails in the middle of a request or of its reply: `proxy`, between the store
/// and its server, cuts the connection at one of `points` bytes spread evenly over one apply's
/// traffic each way, then lets connections through again. The next "process" (opened directly)
/// must converge.
fn proxy_campaign(
    through: &TryOpener<'_>,
    direct: &Opener<'_>,
    proxy: &CuttingProxy,
    points: u64,
    label: &str,
) -> usize {
    let registry_for = |cloud: &Path| {
        let mut r = Registry::new();
        r.register(Arc::new(TestRuntime::with_dir(cloud))).unwrap();
        r
    };
    let mut stack_no = 0;
    let mut cut = 0;
    for generation in [1, 2] {
        let setup = |name: &str, cloud: &Path| {
            if generation == 2 {
                assert_converged(direct(name), &registry_for(cloud), cloud, &spec(1), "setup");
            }
        };
        // How many bytes does one apply of this step send and receive?
        stack_no += 1;
        let dir = tempfile::tempdir().unwrap();
        let cloud = dir.path().join("cloud");
        let name = format!("{label}-count-{stack_no}");
        setup(&name, &cloud);
        proxy.count();
        let stack = Stack {
            store: through(&name).unwrap(),
            registry: registry_for(&cloud),
        };
        apply(&stack, &spec(generation)).unwrap();
        let totals = [
            (Direction::Request, proxy.forwarded(Direction::Request)),
            (Direction::Reply, proxy.forwarded(Direction::Reply)),
        ];
        for (direction, total) in totals {
            for i in 1..=points {
                let at = (total * i / (points + 1)).max(1);
                stack_no += 1;
                let what = format!(
                    "{label} generation {generation} {direction:?} cut at byte {at}/{total}"
                );
                let dir = tempfile::tempdir().unwrap();
                let cloud = dir.path().join("cloud");
                let registry = registry_for(&cloud);
                let name = format!("{label}-{stack_no}");
                setup(&name, &cloud);
                let before = proxy.cuts();
                proxy.arm(direction, at);
                if let Ok(store) = through(&name) {
                    let stack = Stack {
                        store,
                        registry: registry.clone(),
                    };
                    // It fails, or succeeds if a retry went through after the cut.
                    let _ = apply(&stack, &spec(generation));
                }
                proxy.count();
                cut += proxy.cuts() - before;
                let next = direct(&name);
                unlock_if_left(&*next);
                assert_converged(next, &registry, &cloud, &spec(generation), &what);
            }
        }
    }
    // Nearly every armed point falls inside a connection (a few may land in traffic that a
    // store makes only when it opens, which the count included).
    assert!(
        cut as u64 >= points * 3,
        "{label}: only {cut} connections were cut"
    );
    cut
}

#[test]
fn connections_cut_mid_request_or_reply_converge_on_postgres_and_s3() {
    let pg =
        PgServer::start().unwrap_or_else(|e| panic!("the PostgreSQL test server must start: {e}"));
    let pg_proxy = CuttingProxy::start(([127, 0, 0, 1], pg.port()).into());
    let (direct_url, proxied_url) = (
        pg.url(),
        pg.url().replace(
            &format!(":{}/", pg.port()),
            &format!(":{}/", pg_proxy.port()),
        ),
    );
    let n = proxy_campaign(
        &|stack: &str| state::open(&proxied_url, "unused".into(), stack),
        &stores::postgres(&direct_url),
        &pg_proxy,
        6,
        "pg-net",
    );
    eprintln!("postgres: {n} connections cut mid-request or mid-reply, all converged");

    let moto = MotoServer::start();
    moto.create_bucket("kusion-net-faults");
    let port: u16 = moto.endpoint().rsplit(':').next().unwrap().parse().unwrap();
    let s3_proxy = CuttingProxy::start(([127, 0, 0, 1], port).into());
    let proxied_endpoint = format!("http://127.0.0.1:{}", s3_proxy.port());
    let n = proxy_campaign(
        &|stack: &str| {
            let mut config = stores::s3_config(&moto, "kusion-net-faults", stack);
            config.endpoint = Some(proxied_endpoint.clone());
            state::S3Store::new(&config).map(|s| Arc::new(s) as Arc<dyn StateStore>)
        },
        &stores::s3(&moto, "kusion-net-faults"),
        &s3_proxy,
        4,
        "s3-net",
    );
    eprintln!("s3: {n} connections cut mid-request or mid-reply, all converged");
}
