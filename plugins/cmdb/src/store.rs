//! The CMDB store: one table `hosts` in SQLite (a file, the default) or PostgreSQL.
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS hosts (
//!     host          TEXT PRIMARY KEY,   -- container host name (usually the pod name)
//!     cluster       TEXT NOT NULL,      -- cluster name, as in the kubeconfig / spec IDs
//!     namespace     TEXT NOT NULL,
//!     pod           TEXT,
//!     workload      TEXT,               -- owning Deployment/StatefulSet/... name
//!     workload_kind TEXT,               -- Deployment, StatefulSet, DaemonSet, ...
//!     app           TEXT                -- application name (for grouping and batch limits)
//! );
//! ```
//!
//! The table is created when missing. A SQLite file is only created by writes (an import); a
//! look-up against a missing file is an error, so a mistyped path never reads as "no hosts".

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kusion_sdk::{ErrorKind, PluginError};

use crate::record::{HostRecord, UpsertCounts};

/// How long a PostgreSQL connection attempt may take when the URL does not say.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Rows per PostgreSQL statement (array parameters: one round trip per chunk).
const PG_CHUNK: usize = 5_000;
/// Server-side limit per statement (PostgreSQL), when the URL gives no `options`.
const STATEMENT_TIMEOUT: &str = "-c statement_timeout=30000";
/// SQLite limits bound parameters per statement; stay well below the smallest default.
const CHUNK: usize = 500;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS hosts (
    host          TEXT PRIMARY KEY,
    cluster       TEXT NOT NULL,
    namespace     TEXT NOT NULL,
    pod           TEXT,
    workload      TEXT,
    workload_kind TEXT,
    app           TEXT
)";

const SELECT: &str =
    "SELECT host, cluster, namespace, pod, workload, workload_kind, app FROM hosts";

/// Upsert of one row; identical text for SQLite (3.24+) and PostgreSQL apart from placeholders.
const UPSERT_TAIL: &str = "ON CONFLICT (host) DO UPDATE SET cluster = excluded.cluster, \
     namespace = excluded.namespace, pod = excluded.pod, workload = excluded.workload, \
     workload_kind = excluded.workload_kind, app = excluded.app";

/// Why the store could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("CMDB URL {url:?}: {detail}")]
    BadUrl { url: String, detail: String },
    #[error(
        "CMDB {location}: the database file does not exist (load records with `kusionctl cmdb import FILE`, or point the plugin at another URL)"
    )]
    Missing { location: String },
    #[error("CMDB {location} is unreachable: {detail}")]
    Unavailable { location: String, detail: String },
    #[error("CMDB {location}: {detail}")]
    Query { location: String, detail: String },
}

impl From<StoreError> for PluginError {
    fn from(e: StoreError) -> PluginError {
        let kind = match &e {
            StoreError::BadUrl { .. } => ErrorKind::InvalidInput,
            StoreError::Missing { .. } | StoreError::Unavailable { .. } => ErrorKind::Unavailable,
            StoreError::Query { .. } => ErrorKind::Rejected,
        };
        PluginError::new(kind, e.to_string())
    }
}

/// Where the CMDB is: `sqlite:///abs/path.db`, `sqlite://relative.db`, or
/// `postgres://user:password@host:port/db` (also `postgresql://`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Location {
    pub fn parse(url: &str) -> Result<Location, StoreError> {
        let bad = |detail: &str| StoreError::BadUrl {
            url: redact(url),
            detail: detail.to_string(),
        };
        let url = url.trim();
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(bad("no file path after `sqlite://`"));
            }
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            url.parse::<postgres::Config>()
                .map_err(|e| bad(&format!("not a valid PostgreSQL URL: {e}")))?;
            return Ok(Location::Postgres(url.to_string()));
        }
        Err(bad(
            "expected `sqlite:///path/to/cmdb.db` or `postgres://user@host:port/database`",
        ))
    }

    /// The location for messages: passwords replaced by `***`.
    pub fn display(&self) -> String {
        match self {
            Location::Sqlite(p) => format!("sqlite://{}", p.display()),
            Location::Postgres(url) => redact(url),
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Location::Sqlite(_) => "sqlite",
            Location::Postgres(_) => "postgres",
        }
    }
}

/// Replace the password of a URL's user info and any `password=` parameter with `***`.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let authority_start = scheme_end + 3;
    let authority_end = url[authority_start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| authority_start + i);
    let mut out = url[..authority_start].to_string();
    let authority = &url[authority_start..authority_end];
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.split_once(':') {
                Some((user, _)) => out.push_str(&format!("{user}:***")),
                None => out.push_str(userinfo),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let rest = &url[authority_end..];
    match rest.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(rest),
    }
    out
}

/// The full cause chain of an error on one line (driver errors hide the useful part in sources).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        cur = s.source();
    }
    text
}

/// Run blocking PostgreSQL client work on a fresh thread: the sync client drives its own async
/// runtime and must not be entered from a thread that is already inside one (kusionctl's is).
fn off_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

enum Backend {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Client>),
}

/// An open connection to the CMDB.
pub struct Store {
    location: Location,
    backend: Backend,
}

impl Store {
    /// Connect. With `create`, a missing SQLite file is created; the `hosts` table is always
    /// created when missing.
    pub fn open(location: &Location, create: bool) -> Result<Store, StoreError> {
        let shown = location.display();
        let unavailable = |detail: String| StoreError::Unavailable {
            location: shown.clone(),
            detail,
        };
        let backend = match location {
            Location::Sqlite(path) => Backend::Sqlite(open_sqlite(path, create, &shown)?),
            Location::Postgres(url) => {
                let mut config: postgres::Config = url.parse().map_err(|e| StoreError::BadUrl {
                    url: shown.clone(),
                    detail: format!("not a valid PostgreSQL URL: {e}"),
                })?;
                if config.get_connect_timeout().is_none() {
                    config.connect_timeout(CONNECT_TIMEOUT);
                }
                // A server that accepts the connection but never answers must not hang the KCL
                // program: bound every statement unless the URL sets its own server options.
                if config.get_options().is_none() {
                    config.options(STATEMENT_TIMEOUT);
                }
                let client = off_thread(|| -> Result<postgres::Client, StoreError> {
                    let mut client = config
                        .connect(postgres::NoTls)
                        .map_err(|e| unavailable(chain(&e)))?;
                    client
                        .batch_execute(SCHEMA)
                        .map_err(|e| StoreError::Query {
                            location: shown.clone(),
                            detail: format!("creating table `hosts`: {}", chain(&e)),
                        })?;
                    Ok(client)
                })?;
                Backend::Postgres(Box::new(client))
            }
        };
        Ok(Store {
            location: location.clone(),
            backend,
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Whether the connection is known to be dead (the next call should reconnect).
    pub fn is_closed(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(_) => false,
            Backend::Postgres(c) => c.is_closed(),
        }
    }

    fn query_error(&self, what: &str, e: &dyn std::error::Error) -> StoreError {
        let detail = format!("{what}: {}", chain(e));
        if self.is_closed() {
            StoreError::Unavailable {
                location: self.location.display(),
                detail,
            }
        } else {
            StoreError::Query {
                location: self.location.display(),
                detail,
            }
        }
    }

    /// The records of `hosts`, in the same order (`None` for unknown hosts).
    pub fn lookup(&mut self, hosts: &[String]) -> Result<Vec<Option<HostRecord>>, StoreError> {
        let mut known: HashMap<String, HostRecord> = HashMap::new();
        let mut unique: Vec<String> = hosts.to_vec();
        unique.sort();
        unique.dedup();
        let rows = match &mut self.backend {
            Backend::Sqlite(conn) => unique
                .chunks(CHUNK)
                .map(|chunk| sqlite_select(conn, chunk))
                .collect::<Result<Vec<_>, _>>(),
            // One thread for the whole look-up; an array parameter has no size limit, so
            // chunks only bound the size of one answer.
            Backend::Postgres(client) => off_thread(|| {
                unique
                    .chunks(PG_CHUNK)
                    .map(|chunk| pg_select(client, chunk))
                    .collect::<Result<Vec<_>, _>>()
            }),
        }
        .map_err(|e| self.query_error("looking up hosts", &*e))?;
        known.extend(rows.into_iter().flatten().map(|r| (r.host.clone(), r)));
        Ok(hosts.iter().map(|h| known.get(h).cloned()).collect())
    }

    /// Insert new hosts and update changed ones, in one transaction.
    pub fn upsert(&mut self, records: &[HostRecord]) -> Result<UpsertCounts, StoreError> {
        let hosts: Vec<String> = records.iter().map(|r| r.host.clone()).collect();
        let existing = self.lookup(&hosts)?;
        let mut current: HashMap<&str, Option<&HostRecord>> = HashMap::new();
        let mut counts = UpsertCounts::default();
        let mut writes: Vec<&HostRecord> = Vec::new();
        for (record, before) in records.iter().zip(&existing) {
            let before = *current
                .entry(record.host.as_str())
                .or_insert(before.as_ref());
            match before {
                None => counts.inserted += 1,
                Some(b) if b == record => {
                    counts.unchanged += 1;
                    continue;
                }
                Some(_) => counts.updated += 1,
            }
            current.insert(record.host.as_str(), Some(record));
            writes.push(record);
        }
        if writes.is_empty() {
            return Ok(counts);
        }
        // One statement may not touch a row twice (PostgreSQL refuses): keep each host's last.
        let mut last: HashMap<&str, usize> = HashMap::new();
        for (i, r) in writes.iter().enumerate() {
            last.insert(r.host.as_str(), i);
        }
        let writes: Vec<&HostRecord> = writes
            .iter()
            .enumerate()
            .filter(|(i, r)| last[r.host.as_str()] == *i)
            .map(|(_, r)| *r)
            .collect();
        match &mut self.backend {
            Backend::Sqlite(conn) => sqlite_upsert(conn, &writes),
            Backend::Postgres(client) => off_thread(|| pg_upsert(client, &writes)),
        }
        .map_err(|e| self.query_error("writing hosts", &*e))?;
        Ok(counts)
    }

    /// How many hosts the table holds.
    pub fn count(&mut self) -> Result<u64, StoreError> {
        let n = match &mut self.backend {
            Backend::Sqlite(conn) => conn
                .query_row("SELECT COUNT(*) FROM hosts", [], |r| r.get::<_, i64>(0))
                .map_err(Box::<dyn std::error::Error + Send + Sync>::from),
            Backend::Postgres(client) => off_thread(|| {
                client
                    .query_one("SELECT COUNT(*) FROM hosts", &[])
                    .and_then(|r| r.try_get::<_, i64>(0))
                    .map_err(Box::<dyn std::error::Error + Send + Sync>::from)
            }),
        }
        .map_err(|e| self.query_error("counting hosts", &*e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

type DynError = Box<dyn std::error::Error + Send + Sync>;

fn open_sqlite(path: &Path, create: bool, shown: &str) -> Result<rusqlite::Connection, StoreError> {
    use rusqlite::OpenFlags;
    if !create && !path.exists() {
        return Err(StoreError::Missing {
            location: shown.to_string(),
        });
    }
    if create
        && let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::Unavailable {
            location: shown.to_string(),
            detail: format!("creating directory {}: {e}", parent.display()),
        })?;
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let unavailable = |e: &dyn std::error::Error| StoreError::Unavailable {
        location: shown.to_string(),
        detail: chain(e),
    };
    let conn = rusqlite::Connection::open_with_flags(path, flags).map_err(|e| unavailable(&e))?;
    // Another writer (a concurrent import) holds the lock briefly; wait rather than fail.
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(|e| unavailable(&e))?;
    // Reading the catalogue is the first real I/O: a non-SQLite file fails here.
    let has_table: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'hosts')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| unavailable(&e))?;
    if !has_table {
        conn.execute_batch(SCHEMA).map_err(|e| StoreError::Query {
            location: shown.to_string(),
            detail: format!("creating table `hosts`: {}", chain(&e)),
        })?;
    }
    Ok(conn)
}

fn row_to_record(
    get: impl Fn(usize) -> Result<Option<String>, DynError>,
) -> Result<HostRecord, DynError> {
    let required = |i: usize, name: &str| -> Result<String, DynError> {
        get(i)?.ok_or_else(|| format!("column `{name}` is NULL").into())
    };
    Ok(HostRecord {
        host: required(0, "host")?,
        cluster: required(1, "cluster")?,
        namespace: required(2, "namespace")?,
        pod: get(3)?,
        workload: get(4)?,
        workload_kind: get(5)?,
        app: get(6)?,
    })
}

fn sqlite_select(
    conn: &rusqlite::Connection,
    hosts: &[String],
) -> Result<Vec<HostRecord>, DynError> {
    let placeholders = vec!["?"; hosts.len()].join(", ");
    let sql = format!("{SELECT} WHERE host IN ({placeholders})");
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(hosts))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(row_to_record(|i| {
            row.get::<_, Option<String>>(i).map_err(DynError::from)
        })?);
    }
    Ok(out)
}

fn pg_select(client: &mut postgres::Client, hosts: &[String]) -> Result<Vec<HostRecord>, DynError> {
    let sql = format!("{SELECT} WHERE host = ANY($1)");
    let rows = client.query(&sql, &[&hosts])?;
    rows.iter()
        .map(|row| row_to_record(|i| row.try_get::<_, Option<String>>(i).map_err(DynError::from)))
        .collect()
}

fn sqlite_upsert(conn: &mut rusqlite::Connection, records: &[&HostRecord]) -> Result<(), DynError> {
    let tx = conn.transaction()?;
    {
        let sql = format!(
            "INSERT INTO hosts (host, cluster, namespace, pod, workload, workload_kind, app) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) {UPSERT_TAIL}"
        );
        let mut stmt = tx.prepare(&sql)?;
        for r in records {
            stmt.execute(rusqlite::params![
                r.host,
                r.cluster,
                r.namespace,
                r.pod,
                r.workload,
                r.workload_kind,
                r.app
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

fn pg_upsert(client: &mut postgres::Client, records: &[&HostRecord]) -> Result<(), DynError> {
    let mut tx = client.transaction()?;
    // Columns as arrays, rows rebuilt server-side by UNNEST: one round trip per chunk instead
    // of one per row.
    let sql = format!(
        "INSERT INTO hosts (host, cluster, namespace, pod, workload, workload_kind, app) \
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
         $6::text[], $7::text[]) {UPSERT_TAIL}"
    );
    let stmt = tx.prepare(&sql)?;
    for chunk in records.chunks(PG_CHUNK) {
        let req = |f: fn(&HostRecord) -> &String| -> Vec<&str> {
            chunk.iter().map(|r| f(r).as_str()).collect()
        };
        let opt = |f: fn(&HostRecord) -> &Option<String>| -> Vec<Option<&str>> {
            chunk.iter().map(|r| f(r).as_deref()).collect()
        };
        tx.execute(
            &stmt,
            &[
                &req(|r| &r.host),
                &req(|r| &r.cluster),
                &req(|r| &r.namespace),
                &opt(|r| &r.pod),
                &opt(|r| &r.workload),
                &opt(|r| &r.workload_kind),
                &opt(|r| &r.app),
            ],
        )?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_redact() {
        assert_eq!(
            Location::parse("sqlite:///var/lib/cmdb.db").unwrap(),
            Location::Sqlite("/var/lib/cmdb.db".into())
        );
        assert_eq!(
            Location::parse("sqlite://cmdb.db").unwrap(),
            Location::Sqlite("cmdb.db".into())
        );
        let pg = Location::parse("postgres://ops:s3cret@db:5432/cmdb?password=x&sslmode=disable")
            .unwrap();
        assert_eq!(
            pg.display(),
            "postgres://ops:***@db:5432/cmdb?password=***&sslmode=disable"
        );
        let err = Location::parse("mysql://x").unwrap_err().to_string();
        assert!(err.contains("expected `sqlite:///"), "{err}");
        let err = Location::parse("sqlite://").unwrap_err().to_string();
        assert!(err.contains("no file path"), "{err}");
        let err = Location::parse("postgres://u:pw@host:notaport/db")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("pw"), "password leaked: {err}");
    }
}
