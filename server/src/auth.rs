//! Who may do what: bearer tokens kept as SHA-256 hashes (the tokens are 256 random bits, so a
//! fast hash is enough and a stolen token file gives nothing to replay), each with a subject,
//! an expiry and a role per project (`*` for every project).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::ServerError;

/// Roles, each including the ones before it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read stacks, specs, operations, history and events.
    Viewer,
    /// Also start previews, applies and destroys.
    Operator,
    /// Also approve or reject another person's operation.
    Approver,
    /// Also manage tokens and read the audit log.
    Admin,
}

/// The scope key meaning every project.
pub const ALL_PROJECTS: &str = "*";

/// A token as stored: never the token itself.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    /// A public handle for listing and revoking.
    pub id: String,
    /// Who holds it: what the audit log and approvals name.
    pub subject: String,
    /// Hex SHA-256 of the token.
    #[schema(value_type = String)]
    pub hash: String,
    /// Role per project name, `*` for all projects.
    pub scopes: BTreeMap<String, Role>,
    /// Milliseconds since the epoch after which the token is refused.
    pub expires_at: Option<u64>,
    pub created_at: u64,
}

/// The authenticated caller of one request.
#[derive(Debug, Clone)]
pub struct Principal {
    pub token_id: String,
    pub subject: String,
    pub scopes: BTreeMap<String, Role>,
}

impl Principal {
    /// The caller's role on `project` (its own scope or the `*` scope, whichever is higher).
    pub fn role_on(&self, project: &str) -> Option<Role> {
        let own = self.scopes.get(project).copied();
        let all = self.scopes.get(ALL_PROJECTS).copied();
        own.max(all)
    }

    /// True when the caller holds at least `role` on `project`.
    pub fn can(&self, project: &str, role: Role) -> bool {
        self.role_on(project).is_some_and(|r| r >= role)
    }

    /// True when the caller holds at least `role` on every project (`*`).
    pub fn can_everywhere(&self, role: Role) -> bool {
        self.scopes.get(ALL_PROJECTS).is_some_and(|r| *r >= role)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    tokens: Vec<TokenRecord>,
}

/// The embedded default's token store: a JSON file in the server's data folder, rewritten
/// atomically on change.
/// Several servers may share the folder: changes are made under an exclusive lock on
/// `tokens.json.lock` from the file as it is on disk, and each read first reloads the file when
/// it was replaced since it was read.
pub struct FileTokens {
    path: PathBuf,
    tokens: RwLock<Vec<TokenRecord>>,
    /// The identity of the file the tokens were read from (None: there was none).
    loaded: std::sync::Mutex<Option<FileStamp>>,
}

/// Inode, length and modification time: a save renames a new file over the old one.
type FileStamp = (u64, u64, Option<std::time::SystemTime>);

fn stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let ino = 0;
    Some((ino, meta.len(), meta.modified().ok()))
}

fn read_tokens(path: &Path) -> Result<Vec<TokenRecord>, ServerError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice::<TokenFile>(&bytes)
            .map_err(|e| ServerError::Io(format!("reading {}: {e}", path.display())))?
            .tokens),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(ServerError::Io(format!("reading {}: {e}", path.display()))),
    }
}

/// A freshly minted token: the secret is in `token` and nowhere else.
pub struct Minted {
    pub token: String,
    pub record: TokenRecord,
}

/// Every token this server mints starts so.
pub const TOKEN_PREFIX: &str = "kusion_";

pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn random_hex(bytes: usize) -> Result<String, ServerError> {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| ServerError::Io("the system random source failed".into()))?;
    Ok(hex::encode(buf))
}

pub fn now_ms() -> u64 {
    kusion_kernel::state::now_ms()
}

impl FileTokens {
    /// Opens (or starts) the store at `path`.
    pub fn open(path: &Path) -> Result<FileTokens, ServerError> {
        let before = stamp(path);
        let tokens = read_tokens(path)?;
        Ok(FileTokens {
            path: path.to_path_buf(),
            tokens: RwLock::new(tokens),
            loaded: std::sync::Mutex::new(before),
        })
    }

    /// Reloads the tokens when another process replaced the file since they were read. A file
    /// that cannot be read keeps the tokens last read (and says so).
    fn refresh(&self) {
        let now = stamp(&self.path);
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if *loaded == now {
            return;
        }
        match read_tokens(&self.path) {
            Ok(tokens) => {
                *self.tokens.write().unwrap_or_else(|p| p.into_inner()) = tokens;
                *loaded = now;
            }
            Err(e) => tracing::warn!("keeping the tokens last read: {e}"),
        }
    }

    /// Runs `change` on the tokens as they are on disk, under the folder's lock, and saves them
    /// when it returns true.
    fn modify<T>(
        &self,
        change: impl FnOnce(&mut Vec<TokenRecord>) -> (bool, T),
    ) -> Result<T, ServerError> {
        let lock_path = self.path.with_extension("json.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .and_then(|f| f.lock().map(|_| f))
            .map_err(|e| ServerError::Io(format!("locking {}: {e}", lock_path.display())))?;
        // `loaded` before `tokens`, the order `refresh` takes them in.
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let mut tokens = self.tokens.write().unwrap_or_else(|p| p.into_inner());
        *tokens = read_tokens(&self.path)?;
        *loaded = stamp(&self.path);
        let (save, out) = change(&mut tokens);
        if save {
            self.save(&tokens)?;
            *loaded = stamp(&self.path);
        }
        drop(lock);
        Ok(out)
    }

    fn save(&self, tokens: &[TokenRecord]) -> Result<(), ServerError> {
        let io =
            |e: std::io::Error| ServerError::Io(format!("writing {}: {e}", self.path.display()));
        let text = serde_json::to_vec_pretty(&TokenFile {
            tokens: tokens.to_vec(),
        })
        .map_err(|e| ServerError::Io(e.to_string()))?;
        let tmp = self.path.with_extension("json.tmp");
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                // Hashes only, but nobody else has a reason to read them.
                options.mode(0o600);
            }
            let mut f = options.open(&tmp).map_err(io)?;
            f.write_all(&text).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &self.path).map_err(io)
    }

    fn insert(&self, record: TokenRecord) -> Result<(), ServerError> {
        self.modify(|tokens| {
            tokens.push(record);
            (true, ())
        })
    }

    /// Revokes every token of `subject`.
    pub fn revoke_subject(&self, subject: &str) -> Result<usize, ServerError> {
        self.modify(|tokens| {
            let before = tokens.len();
            tokens.retain(|t| t.subject != subject);
            let removed = before - tokens.len();
            (removed > 0, removed)
        })
    }

    /// Revokes the token with `id`; false when there is none.
    pub fn revoke(&self, id: &str) -> Result<bool, ServerError> {
        self.modify(|tokens| {
            let before = tokens.len();
            tokens.retain(|t| t.id != id);
            let removed = tokens.len() != before;
            (removed, removed)
        })
    }

    pub fn list(&self) -> Vec<TokenRecord> {
        self.refresh();
        self.tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn find(&self, hash: &str) -> Option<TokenRecord> {
        self.refresh();
        let tokens = self.tokens.read().unwrap_or_else(|p| p.into_inner());
        tokens.iter().find(|t| t.hash == hash).cloned()
    }
}

/// A new token and its record (the secret is in the token only).
fn new_token(
    subject: &str,
    scopes: BTreeMap<String, Role>,
    ttl: Option<std::time::Duration>,
) -> Result<Minted, ServerError> {
    let token = format!("{TOKEN_PREFIX}{}", random_hex(32)?);
    let now = now_ms();
    let record = TokenRecord {
        id: random_hex(8)?,
        subject: subject.to_string(),
        hash: hash_token(&token),
        scopes,
        expires_at: ttl.map(|d| now.saturating_add(d.as_millis() as u64)),
        created_at: now,
    };
    Ok(Minted { token, record })
}

/// Where a server's tokens live: the data folder's `tokens.json` (the embedded default), or the
/// PostgreSQL the servers' operation queue is in ([`PgTokens`]).
pub enum TokenStore {
    File(FileTokens),
    Postgres(PgTokens),
}

impl TokenStore {
    /// The file store at `path`.
    pub fn open(path: &Path) -> Result<TokenStore, ServerError> {
        FileTokens::open(path).map(TokenStore::File)
    }

    /// True when the tokens are shared through PostgreSQL.
    pub fn is_shared(&self) -> bool {
        matches!(self, TokenStore::Postgres(_))
    }

    /// Mints a token for `subject` with `scopes`, valid for `ttl` (forever when None).
    pub fn mint(
        &self,
        subject: &str,
        scopes: BTreeMap<String, Role>,
        ttl: Option<std::time::Duration>,
    ) -> Result<Minted, ServerError> {
        let minted = new_token(subject, scopes, ttl)?;
        match self {
            TokenStore::File(f) => f.insert(minted.record.clone())?,
            TokenStore::Postgres(p) => p.insert(&minted.record)?,
        }
        Ok(minted)
    }

    /// Revokes every token of `subject`; how many there were.
    pub fn revoke_subject(&self, subject: &str) -> Result<usize, ServerError> {
        match self {
            TokenStore::File(f) => f.revoke_subject(subject),
            TokenStore::Postgres(p) => p.revoke_where("subject", subject),
        }
    }

    /// Revokes the token with `id`; false when there is none.
    pub fn revoke(&self, id: &str) -> Result<bool, ServerError> {
        match self {
            TokenStore::File(f) => f.revoke(id),
            TokenStore::Postgres(p) => p.revoke_where("id", id).map(|n| n > 0),
        }
    }

    pub fn list(&self) -> Result<Vec<TokenRecord>, ServerError> {
        match self {
            TokenStore::File(f) => Ok(f.list()),
            TokenStore::Postgres(p) => p.list(),
        }
    }

    /// The principal a presented token stands for: None when unknown, revoked or expired (or
    /// when the store cannot be read: a request is refused rather than let through).
    pub fn verify(&self, token: &str) -> Option<Principal> {
        self.verify_with(token, false)
    }

    /// As [`TokenStore::verify`], but without asking a shared database: a token this server
    /// verified recently (still in its cache), or one of a file store (read into memory).
    pub fn verify_cached(&self, token: &str) -> Option<Principal> {
        self.verify_with(token, true)
    }

    fn verify_with(&self, token: &str, cached_only: bool) -> Option<Principal> {
        if !token.starts_with(TOKEN_PREFIX) {
            return None;
        }
        let hash = hash_token(token);
        let record = match self {
            TokenStore::File(f) => f.find(&hash),
            TokenStore::Postgres(p) if cached_only => p.cached(&hash),
            TokenStore::Postgres(p) => match p.find(&hash) {
                Ok(found) => found,
                Err(e) => {
                    tracing::error!("verifying a token: {e}");
                    None
                }
            },
        }?;
        if record.expires_at.is_some_and(|at| now_ms() >= at) {
            return None;
        }
        Some(Principal {
            token_id: record.id,
            subject: record.subject,
            scopes: record.scopes,
        })
    }
}

const TOKEN_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kusion_token (
    id text PRIMARY KEY,
    subject text NOT NULL,
    hash text NOT NULL UNIQUE,
    scopes text NOT NULL,
    expires_at bigint,
    created_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS kusion_token_subject ON kusion_token (subject);
";

/// How long a verified token is trusted from memory at most. Revocation reaches every server
/// through `NOTIFY kusion_tokens` at once (the cache is dropped on each notification); this
/// bounds it when a notification is lost with the listening connection.
pub const TOKEN_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(5);

/// The cache holds at most this many verified tokens (it is emptied when full).
const TOKEN_CACHE_MAX: usize = 10_000;

struct Cached {
    record: TokenRecord,
    at: std::time::Instant,
    generation: u64,
}

/// Tokens in the PostgreSQL shared by the servers (`kusion_token`: one row per token, its hash
/// unique). Verification happens on every request, so a verified token is kept in memory for
/// at most `cache_ttl`, and forgotten at once when any server mints or revokes a token (a
/// `NOTIFY` on `kusion_tokens`, which the pool's listener turns into a new generation).
/// Unknown tokens are not cached: a token minted through another server works at once.
pub struct PgTokens {
    pool: std::sync::Arc<crate::pgconn::PgPool>,
    cache: std::sync::Mutex<std::collections::HashMap<String, Cached>>,
    changes: tokio::sync::watch::Receiver<u64>,
    cache_ttl: std::time::Duration,
}

fn stored(row: &postgres::Row) -> Result<TokenRecord, crate::pgconn::Failure> {
    let scopes: String = row.get(3);
    let expires_at: Option<i64> = row.get(4);
    let created_at: i64 = row.get(5);
    Ok(TokenRecord {
        id: row.get(0),
        subject: row.get(1),
        hash: row.get(2),
        scopes: serde_json::from_str(&scopes).map_err(|e| {
            crate::pgconn::Failure::Other(ServerError::Io(format!("a stored token's scopes: {e}")))
        })?,
        expires_at: expires_at.map(|v| v.max(0) as u64),
        created_at: created_at.max(0) as u64,
    })
}

const TOKEN_COLUMNS: &str = "id, subject, hash, scopes, expires_at, created_at";

impl PgTokens {
    /// The store on `pool`, creating its table on first use.
    pub fn open(
        pool: std::sync::Arc<crate::pgconn::PgPool>,
        cache_ttl: std::time::Duration,
    ) -> Result<PgTokens, ServerError> {
        pool.ensure_schema(TOKEN_SCHEMA)?;
        Ok(PgTokens {
            changes: pool.token_changes(),
            pool,
            cache: Default::default(),
            cache_ttl,
        })
    }

    fn forget(&self) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn insert(&self, record: &TokenRecord) -> Result<(), ServerError> {
        let record = record.clone();
        let scopes =
            serde_json::to_string(&record.scopes).map_err(|e| ServerError::Io(e.to_string()))?;
        self.pool.call(move |c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "INSERT INTO kusion_token (id, subject, hash, scopes, expires_at, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &record.id,
                    &record.subject,
                    &record.hash,
                    &scopes,
                    &record.expires_at.map(|v| v.min(i64::MAX as u64) as i64),
                    &(record.created_at.min(i64::MAX as u64) as i64),
                ],
            )?;
            crate::pgconn::notify(&mut tx, crate::pgconn::TOKENS_CHANNEL)?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Deletes the tokens whose `column` (`id` or `subject`) is `value`.
    fn revoke_where(&self, column: &'static str, value: &str) -> Result<usize, ServerError> {
        let value = value.to_string();
        let n = self.pool.call(move |c| {
            let mut tx = c.transaction()?;
            let n = tx.execute(
                &format!("DELETE FROM kusion_token WHERE {column} = $1"),
                &[&value],
            )?;
            if n > 0 {
                crate::pgconn::notify(&mut tx, crate::pgconn::TOKENS_CHANNEL)?;
            }
            tx.commit()?;
            Ok(n as usize)
        })?;
        // This server need not wait for its own notification.
        self.forget();
        Ok(n)
    }

    fn list(&self) -> Result<Vec<TokenRecord>, ServerError> {
        self.pool.call(|c| {
            c.query(
                &format!("SELECT {TOKEN_COLUMNS} FROM kusion_token ORDER BY created_at, id"),
                &[],
            )?
            .iter()
            .map(stored)
            .collect()
        })
    }

    /// The token with `hash` if it is in the cache and still fresh.
    fn cached(&self, hash: &str) -> Option<TokenRecord> {
        let generation = *self.changes.borrow();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        match cache.get(hash) {
            Some(c) if c.generation == generation && c.at.elapsed() < self.cache_ttl => {
                Some(c.record.clone())
            }
            Some(_) => {
                cache.remove(hash);
                None
            }
            None => None,
        }
    }

    fn find(&self, hash: &str) -> Result<Option<TokenRecord>, ServerError> {
        let generation = *self.changes.borrow();
        if let Some(record) = self.cached(hash) {
            return Ok(Some(record));
        }
        let key = hash.to_string();
        let found = self.pool.call(move |c| {
            c.query_opt(
                &format!("SELECT {TOKEN_COLUMNS} FROM kusion_token WHERE hash = $1"),
                &[&key],
            )?
            .as_ref()
            .map(stored)
            .transpose()
        })?;
        if let Some(record) = &found
            && !self.cache_ttl.is_zero()
        {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if cache.len() >= TOKEN_CACHE_MAX {
                cache.clear();
            }
            // Cached under the generation read before the query: a revocation notified while
            // it ran makes the entry stale at once.
            cache.insert(
                hash.to_string(),
                Cached {
                    record: record.clone(),
                    at: std::time::Instant::now(),
                    generation,
                },
            );
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_rest_hashed_expire_and_scope_by_project() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let store = TokenStore::open(&path).unwrap();
        let scopes = BTreeMap::from([("shop".to_string(), Role::Operator)]);
        let minted = store.mint("alice", scopes, None).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(&minted.token),
            "the token itself is not stored"
        );
        assert!(text.contains(&hash_token(&minted.token)));
        let reopened = TokenStore::open(&path).unwrap();
        let p = reopened.verify(&minted.token).unwrap();
        assert_eq!(p.subject, "alice");
        assert!(p.can("shop", Role::Viewer) && p.can("shop", Role::Operator));
        assert!(!p.can("shop", Role::Approver) && !p.can("other", Role::Viewer));
        assert!(reopened.verify("kusion_00").is_none());
        assert!(reopened.verify("").is_none());

        let expired = store
            .mint("bob", BTreeMap::new(), Some(std::time::Duration::ZERO))
            .unwrap();
        assert!(store.verify(&expired.token).is_none());
        assert!(store.revoke(&minted.record.id).unwrap());
        assert!(store.verify(&minted.token).is_none());
    }

    #[test]
    fn servers_sharing_the_folder_see_each_others_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let a = TokenStore::open(&path).unwrap();
        let b = TokenStore::open(&path).unwrap();
        let all = BTreeMap::from([(ALL_PROJECTS.to_string(), Role::Admin)]);
        let from_a = a.mint("alice", all.clone(), None).unwrap();
        let from_b = b.mint("bob", all, None).unwrap();
        // B minted from the file as A left it: neither change is lost.
        assert!(a.verify(&from_b.token).is_some());
        assert!(b.verify(&from_a.token).is_some());
        assert_eq!(a.list().unwrap().len(), 2);
        assert!(b.revoke(&from_a.record.id).unwrap());
        assert!(a.verify(&from_a.token).is_none());
        assert_eq!(b.revoke_subject("bob").unwrap(), 1);
        assert!(a.verify(&from_b.token).is_none());
        assert!(a.list().unwrap().is_empty());
    }
}
