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

/// The token store: a JSON file in the server's data folder, rewritten atomically on change.
/// Several servers may share the folder: changes are made under an exclusive lock on
/// `tokens.json.lock` from the file as it is on disk, and each read first reloads the file when
/// it was replaced since it was read.
pub struct TokenStore {
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

impl TokenStore {
    /// Opens (or starts) the store at `path`.
    pub fn open(path: &Path) -> Result<TokenStore, ServerError> {
        let before = stamp(path);
        let tokens = read_tokens(path)?;
        Ok(TokenStore {
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

    /// Mints a token for `subject` with `scopes`, valid for `ttl` (forever when None).
    pub fn mint(
        &self,
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
        self.modify(|tokens| {
            tokens.push(record.clone());
            (true, ())
        })?;
        Ok(Minted { token, record })
    }

    /// Revokes every token of `subject` (the embedded server's start-up admin token is replaced
    /// on each start, so only the last one printed works).
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

    /// The principal a presented token stands for: None when unknown or expired.
    pub fn verify(&self, token: &str) -> Option<Principal> {
        if !token.starts_with(TOKEN_PREFIX) {
            return None;
        }
        let hash = hash_token(token);
        self.refresh();
        let tokens = self.tokens.read().unwrap_or_else(|p| p.into_inner());
        let record = tokens.iter().find(|t| t.hash == hash)?;
        if record.expires_at.is_some_and(|at| now_ms() >= at) {
            return None;
        }
        Some(Principal {
            token_id: record.id.clone(),
            subject: record.subject.clone(),
            scopes: record.scopes.clone(),
        })
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
        assert_eq!(a.list().len(), 2);
        assert!(b.revoke(&from_a.record.id).unwrap());
        assert!(a.verify(&from_a.token).is_none());
        assert_eq!(b.revoke_subject("bob").unwrap(), 1);
        assert!(a.verify(&from_b.token).is_none());
        assert!(a.list().is_empty());
    }
}
