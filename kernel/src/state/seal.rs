//! Sensitive values at rest: state and journal never hold them in clear.
//!
//! Every value at a sensitive path (a Kubernetes Secret's `data`/`stringData`, paths a runtime
//! marks sensitive, and fields filled from those by `$kusion_path`) is replaced, leaf by leaf, by
//! a *sealed* string before it is written:
//!
//! - `$kusion_sealed:v1:h:<mac>`: a keyed hash (HMAC-SHA256 with the stack's own random key),
//!   enough to tell whether a value changed, but not the value;
//! - `$kusion_sealed:v1:e:<mac>:<ciphertext>`: the same hash plus the value encrypted with
//!   AES-256-GCM, when a state key is configured, so operations that need the old value (a
//!   rollback, a Terraform prior the provider cannot read back) get it.
//!
//! The state key comes from `KUSION_STATE_PASSPHRASE` (stretched with PBKDF2 and the stack's
//! salt), `KUSION_STATE_KEY_FILE` (a file of at least 32 bytes), or AWS KMS
//! (`KUSION_STATE_KMS_KEY_ID`: a data key made by KMS, kept in state only as KMS encrypted it;
//! see [`super::kms`]). The stack records which kind
//! of key sealed it and a check value, so a wrong or missing key is an error, not garbage.
//!
//! Sealing keeps the shape (a Secret's keys stay visible) and is idempotent.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use kusion_sdk::{FieldPath, Resource};
use ring::rand::SecureRandom;
use ring::{aead, hmac, pbkdf2};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{JournalRecord, State, StateEntry};

/// What a sealed value starts with.
pub const PREFIX: &str = "$kusion_sealed:";
const HASHED: &str = "$kusion_sealed:v1:h:";
const ENCRYPTED: &str = "$kusion_sealed:v1:e:";
const PBKDF2_ROUNDS: u32 = 210_000;

/// How a stack's sensitive values are sealed (kept in the snapshot and journaled when made).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sealing {
    /// The stack's random HMAC key (base64): hashes of equal values agree across machines.
    pub hash_key: String,
    /// `passphrase` or `keyFile` when values are also encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_kind: Option<String>,
    /// Salt for deriving the encryption key (base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salt: Option<String>,
    /// A MAC made with the derived key, to recognise the right key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_check: Option<String>,
    /// With AWS KMS: the stack's data key as KMS encrypted it (base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapped_key: Option<String>,
}

/// Why a value cannot be sealed or unsealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The key could not be read or used.
    #[error("the state key: {0}")]
    Key(String),
    /// The stack's state is encrypted but no key is set.
    #[error(
        "this stack's state is encrypted with a {kind}; set {var} to write to it (values encrypted with it would otherwise be kept only as hashes)"
    )]
    KeyMissing {
        /// What kind of key (a passphrase, a key file, a KMS key).
        kind: String,
        /// The variable that sets it.
        var: &'static str,
    },
    /// The key set is not the one the state was encrypted with.
    #[error(
        "the state key does not match the {kind} this stack's state was encrypted with (check {var})"
    )]
    WrongKey {
        /// What kind of key (a passphrase, a key file, a KMS key).
        kind: String,
        /// The variable that sets it.
        var: &'static str,
    },
}

/// A configured state key, as read from the environment.
#[derive(Clone)]
pub enum KeySource {
    /// A passphrase (`KUSION_STATE_PASSPHRASE`).
    Passphrase(String),
    /// A key file's bytes (`KUSION_STATE_KEY_FILE`).
    KeyFile(Vec<u8>),
    /// A KMS key (`KUSION_STATE_KMS_KEY_ID`).
    Kms(super::kms::Kms),
}

impl KeySource {
    /// `KUSION_STATE_PASSPHRASE`, else `KUSION_STATE_KEY_FILE`, else `KUSION_STATE_KMS_KEY_ID`,
    /// else none.
    pub fn from_env() -> Result<Option<KeySource>, SealError> {
        if let Ok(p) = std::env::var("KUSION_STATE_PASSPHRASE")
            && !p.is_empty()
        {
            return Ok(Some(KeySource::Passphrase(p)));
        }
        if let Ok(path) = std::env::var("KUSION_STATE_KEY_FILE")
            && !path.is_empty()
        {
            let bytes = std::fs::read(&path)
                .map_err(|e| SealError::Key(format!("KUSION_STATE_KEY_FILE {path}: {e}")))?;
            if bytes.len() < 32 {
                return Err(SealError::Key(format!(
                    "KUSION_STATE_KEY_FILE {path} holds {} bytes; a key needs at least 32 (e.g. `head -c 32 /dev/urandom > {path}`)",
                    bytes.len()
                )));
            }
            return Ok(Some(KeySource::KeyFile(bytes)));
        }
        if let Ok(id) = std::env::var("KUSION_STATE_KMS_KEY_ID")
            && !id.is_empty()
        {
            return super::kms::Kms::from_env(&id)
                .map(|k| Some(KeySource::Kms(k)))
                .map_err(SealError::Key);
        }
        Ok(None)
    }

    fn kind(&self) -> &'static str {
        match self {
            KeySource::Passphrase(_) => "passphrase",
            KeySource::KeyFile(_) => "keyFile",
            KeySource::Kms(_) => "kms",
        }
    }
}

fn var_of(kind: &str) -> &'static str {
    match kind {
        "passphrase" => "KUSION_STATE_PASSPHRASE",
        "kms" => "KUSION_STATE_KMS_KEY_ID",
        _ => "KUSION_STATE_KEY_FILE",
    }
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source");
    bytes
}

/// Seals and (with a key) unseals one stack's values.
pub struct Sealer {
    mac: hmac::Key,
    cipher: Option<aead::LessSafeKey>,
    /// The sealing record to journal before the first sealed write, when it is new or changed.
    pub(crate) fresh: Option<Sealing>,
    pub(crate) sealing: Sealing,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("encrypts", &self.cipher.is_some())
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// The sealer for `state`: its recorded sealing, extended with the configured key. A new
    /// or changed sealing is in `Sealer::fresh`, to be journaled by the writer.
    pub fn for_state(state: &State, key: Option<&KeySource>) -> Result<Sealer, SealError> {
        let (mut sealing, mut fresh) = match &state.sealing {
            Some(s) => (s.clone(), false),
            None => (
                Sealing {
                    hash_key: B64.encode(random::<32>()),
                    key_kind: None,
                    salt: None,
                    key_check: None,
                    wrapped_key: None,
                },
                true,
            ),
        };
        let hash_key = B64
            .decode(&sealing.hash_key)
            .map_err(|e| SealError::Key(format!("the stack's hash key is unreadable: {e}")))?;
        let cipher = match (key, sealing.key_kind.clone()) {
            (None, _) => None,
            (Some(source), recorded) => {
                if let Some(kind) = &recorded
                    && kind != source.kind()
                {
                    return Err(SealError::WrongKey {
                        kind: kind.clone(),
                        var: var_of(kind),
                    });
                }
                let salt = match &sealing.salt {
                    Some(s) => B64
                        .decode(s)
                        .map_err(|e| SealError::Key(format!("the stack's salt: {e}")))?,
                    None => random::<16>().to_vec(),
                };
                let key = match source {
                    KeySource::Kms(kms) => {
                        let data_key = match &sealing.wrapped_key {
                            Some(wrapped) => {
                                let blob = B64.decode(wrapped).map_err(|e| {
                                    SealError::Key(format!("the stack's wrapped key: {e}"))
                                })?;
                                kms.decrypt(&blob).map_err(SealError::Key)?
                            }
                            None => {
                                let (plain, blob) =
                                    kms.generate_data_key().map_err(SealError::Key)?;
                                sealing.wrapped_key = Some(B64.encode(blob));
                                plain
                            }
                        };
                        let mut key = [0u8; 32];
                        if data_key.len() != 32 {
                            return Err(SealError::Key(format!(
                                "KMS gave a data key of {} bytes, expected 32",
                                data_key.len()
                            )));
                        }
                        key.copy_from_slice(&data_key);
                        key
                    }
                    other => derive(other, &salt),
                };
                let check = B64.encode(
                    hmac::sign(
                        &hmac::Key::new(hmac::HMAC_SHA256, &key),
                        b"kusion state key",
                    )
                    .as_ref(),
                );
                match &sealing.key_check {
                    Some(recorded) if *recorded != check => {
                        let kind = source.kind().to_string();
                        return Err(SealError::WrongKey {
                            var: var_of(&kind),
                            kind,
                        });
                    }
                    Some(_) => {}
                    None => {
                        sealing.key_kind = Some(source.kind().to_string());
                        sealing.salt = Some(B64.encode(&salt));
                        sealing.key_check = Some(check);
                        fresh = true;
                    }
                }
                let unbound = aead::UnboundKey::new(&aead::AES_256_GCM, &key)
                    .map_err(|_| SealError::Key("cannot make an AES-256 key".into()))?;
                Some(aead::LessSafeKey::new(unbound))
            }
        };
        Ok(Sealer {
            mac: hmac::Key::new(hmac::HMAC_SHA256, &hash_key),
            cipher,
            fresh: fresh.then(|| sealing.clone()),
            sealing,
        })
    }

    /// Refuse to write state encrypted with a key that is not configured (writes would seal
    /// new values as hashes only, quietly losing what rollback needs).
    pub fn require_key_for_writes(&self) -> Result<(), SealError> {
        match (&self.cipher, &self.sealing.key_kind) {
            (None, Some(kind)) => Err(SealError::KeyMissing {
                kind: kind.clone(),
                var: var_of(kind),
            }),
            _ => Ok(()),
        }
    }

    fn mac_of(&self, value: &Value) -> String {
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        B64.encode(hmac::sign(&self.mac, &bytes).as_ref())
    }

    /// The sealed form of one leaf value.
    pub fn seal_value(&self, value: &Value) -> Value {
        if is_sealed(value) {
            return value.clone();
        }
        let mac = self.mac_of(value);
        let text = match &self.cipher {
            None => format!("{HASHED}{mac}"),
            Some(key) => {
                let nonce = random::<12>();
                let mut data = serde_json::to_vec(value).unwrap_or_default();
                key.seal_in_place_append_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(mac.as_bytes()),
                    &mut data,
                )
                .expect("AES-GCM sealing of an in-memory buffer");
                let mut blob = nonce.to_vec();
                blob.extend_from_slice(&data);
                format!("{ENCRYPTED}{mac}:{}", B64.encode(blob))
            }
        };
        Value::String(text)
    }

    /// The clear value of a sealed string, when it was encrypted and the key is here.
    pub fn unseal(&self, sealed: &str) -> Option<Value> {
        let rest = sealed.strip_prefix(ENCRYPTED)?;
        let (mac, blob) = rest.split_once(':')?;
        let key = self.cipher.as_ref()?;
        let mut blob = B64.decode(blob).ok()?;
        if blob.len() < 12 {
            return None;
        }
        let mut data = blob.split_off(12);
        let nonce = aead::Nonce::try_assume_unique_for_key(&blob).ok()?;
        let clear = key
            .open_in_place(nonce, aead::Aad::from(mac.as_bytes()), &mut data)
            .ok()?;
        serde_json::from_slice(clear).ok()
    }

    /// Whether `sealed` is the sealed form of `value` (same stack key).
    pub fn matches(&self, sealed: &str, value: &Value) -> bool {
        mac_part(sealed).is_some_and(|mac| mac == self.mac_of(value))
    }

    /// Seal every leaf at or under `paths` in `attrs`.
    fn seal_paths(&self, attrs: &mut serde_json::Map<String, Value>, paths: &[FieldPath]) {
        if paths.is_empty() {
            return;
        }
        let mut value = Value::Object(std::mem::take(attrs));
        for path in paths {
            if let Some(v) = path.get_mut(&mut value) {
                self.seal_leaves(v);
            }
        }
        if let Value::Object(map) = value {
            *attrs = map;
        }
    }

    fn seal_leaves(&self, value: &mut Value) {
        match value {
            Value::Object(map) => map.values_mut().for_each(|v| self.seal_leaves(v)),
            Value::Array(items) => items.iter_mut().for_each(|v| self.seal_leaves(v)),
            Value::Null => {}
            other => *other = self.seal_value(other),
        }
    }

    /// Seal a resource's sensitive values: the builtin paths and `extra`.
    pub fn seal_resource(&self, resource: &mut Resource, extra: &[String]) {
        let paths = sensitive_paths(resource, extra);
        self.seal_paths(&mut resource.attributes, &paths);
    }

    /// Seal a state entry's sensitive values: the builtin paths and those it records.
    pub fn seal_entry(&self, entry: &mut StateEntry) {
        let paths = sensitive_paths(&entry.resource, &entry.sensitive_paths);
        self.seal_paths(&mut entry.resource.attributes, &paths);
    }

    /// Seal what a journal record carries.
    pub fn seal_record(&self, record: &mut JournalRecord) {
        match record {
            JournalRecord::Intent {
                resource,
                sensitive_paths,
                ..
            } => self.seal_resource(resource, sensitive_paths),
            JournalRecord::Applied { entry } | JournalRecord::Renamed { entry, .. } => {
                self.seal_entry(entry)
            }
            JournalRecord::Revert {
                previous: Some(entry),
                ..
            } => self.seal_entry(entry),
            _ => {}
        }
    }

    /// Replace every encrypted value in `state` by its clear value (hashes stay sealed).
    pub fn unseal_state(&self, state: &mut State) {
        if self.cipher.is_none() {
            return;
        }
        for entry in state.resources.values_mut() {
            for v in entry.resource.attributes.values_mut() {
                self.unseal_leaves(v);
            }
        }
    }

    fn unseal_leaves(&self, value: &mut Value) {
        match value {
            Value::Object(map) => map.values_mut().for_each(|v| self.unseal_leaves(v)),
            Value::Array(items) => items.iter_mut().for_each(|v| self.unseal_leaves(v)),
            Value::String(s) if s.starts_with(ENCRYPTED) => {
                if let Some(clear) = self.unseal(s) {
                    *value = clear;
                }
            }
            _ => {}
        }
    }

    /// A copy of `prior` in which each sealed leaf whose hash matches the planned value at the
    /// same path is that value again: what a runtime needs as the prior (a Terraform provider
    /// compares it with the configuration) when the secret did not change.
    pub fn unseal_from(&self, prior: &Resource, planned: &Resource) -> Resource {
        let mut out = prior.clone();
        let planned = Value::Object(planned.attributes.clone());
        let mut attrs = Value::Object(std::mem::take(&mut out.attributes));
        self.unseal_matching(&mut attrs, &planned);
        if let Value::Object(map) = attrs {
            out.attributes = map;
        }
        out
    }

    fn unseal_matching(&self, value: &mut Value, planned: &Value) {
        match (value, planned) {
            (Value::Object(map), Value::Object(p)) => {
                for (k, v) in map.iter_mut() {
                    if let Some(pv) = p.get(k) {
                        self.unseal_matching(v, pv);
                    }
                }
            }
            (Value::Array(items), Value::Array(p)) => {
                for (v, pv) in items.iter_mut().zip(p) {
                    self.unseal_matching(v, pv);
                }
            }
            (v @ Value::String(_), pv) => {
                if let Value::String(s) = &*v
                    && s.starts_with(PREFIX)
                    && self.matches(s, pv)
                {
                    *v = pv.clone();
                }
            }
            _ => {}
        }
    }
}

/// The MAC part of a sealed string.
fn mac_part(sealed: &str) -> Option<&str> {
    if let Some(rest) = sealed.strip_prefix(HASHED) {
        return Some(rest);
    }
    sealed
        .strip_prefix(ENCRYPTED)
        .and_then(|rest| rest.split_once(':'))
        .map(|(mac, _)| mac)
}

/// Whether a value is a sealed string.
pub fn is_sealed(value: &Value) -> bool {
    matches!(value, Value::String(s) if s.starts_with(PREFIX))
}

/// Whether any leaf of `value` is sealed.
pub fn contains_sealed(value: &Value) -> bool {
    crate::diff::any_string_starts_with(value, PREFIX)
}

fn sensitive_paths(resource: &Resource, extra: &[String]) -> Vec<FieldPath> {
    let mut paths = crate::diff::builtin_sensitive_paths(resource);
    paths.extend(extra.iter().filter_map(|p| FieldPath::parse(p).ok()));
    paths
}

fn derive(source: &KeySource, salt: &[u8]) -> [u8; 32] {
    let mut key = [0u8; 32];
    match source {
        KeySource::Passphrase(p) => pbkdf2::derive(
            pbkdf2::PBKDF2_HMAC_SHA256,
            std::num::NonZeroU32::new(PBKDF2_ROUNDS).expect("non-zero"),
            salt,
            p.as_bytes(),
            &mut key,
        ),
        KeySource::KeyFile(bytes) => {
            // A key file is already random: one HMAC binds it to the stack's salt.
            let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, salt), bytes);
            key.copy_from_slice(&tag.as_ref()[..32]);
        }
        KeySource::Kms(_) => unreachable!("KMS data keys are not derived"),
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(value: &str) -> Resource {
        let mut r = Resource::new("v1:Secret:ns:s", crate::id::KUBERNETES, Default::default());
        r.attributes.insert("apiVersion".into(), json!("v1"));
        r.attributes.insert("kind".into(), json!("Secret"));
        r.attributes.insert(
            "data".into(),
            json!({"password": value, "user": "YWRtaW4="}),
        );
        r
    }

    #[test]
    fn hashes_detect_change_and_hide_the_value() {
        let sealer = Sealer::for_state(&State::default(), None).unwrap();
        assert!(sealer.fresh.is_some(), "a new stack gets a sealing record");
        let mut r = secret("aHVudGVyMg==");
        sealer.seal_resource(&mut r, &[]);
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("aHVudGVyMg=="), "{text}");
        assert!(!text.contains("YWRtaW4="), "{text}");
        let sealed = r.attributes["data"]["password"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(sealer.matches(&sealed, &json!("aHVudGVyMg==")));
        assert!(!sealer.matches(&sealed, &json!("b3RoZXI=")));
        // Idempotent, and the planned value comes back where it did not change.
        let again = {
            let mut r2 = r.clone();
            sealer.seal_resource(&mut r2, &[]);
            r2
        };
        assert_eq!(again, r);
        let prior = sealer.unseal_from(&r, &secret("aHVudGVyMg=="));
        assert_eq!(prior.attributes["data"]["password"], json!("aHVudGVyMg=="));
        let prior = sealer.unseal_from(&r, &secret("b3RoZXI="));
        assert!(is_sealed(&prior.attributes["data"]["password"]));
    }

    #[test]
    fn a_key_encrypts_and_a_wrong_key_is_refused() {
        let key = KeySource::KeyFile(vec![7u8; 32]);
        let sealer = Sealer::for_state(&State::default(), Some(&key)).unwrap();
        let mut state = State {
            sealing: sealer.fresh.clone(),
            ..State::default()
        };
        let mut r = secret("aHVudGVyMg==");
        sealer.seal_resource(&mut r, &[]);
        assert!(!serde_json::to_string(&r).unwrap().contains("aHVudGVyMg=="));
        let entry = StateEntry {
            resource: r,
            private: None,
            sensitive_paths: vec![],
            pending: false,
            updated_at: 0,
            target: None,
        };
        state.resources.insert(entry.key(), entry);
        let again = Sealer::for_state(&state, Some(&key)).unwrap();
        assert!(again.fresh.is_none());
        let mut clear = state.clone();
        again.unseal_state(&mut clear);
        assert_eq!(
            clear.resources["v1:Secret:ns:s"].resource.attributes["data"]["password"],
            json!("aHVudGVyMg==")
        );
        let wrong = KeySource::KeyFile(vec![8u8; 32]);
        assert!(matches!(
            Sealer::for_state(&state, Some(&wrong)),
            Err(SealError::WrongKey { .. })
        ));
        let keyless = Sealer::for_state(&state, None).unwrap();
        assert!(keyless.require_key_for_writes().is_err());
        let passphrase = KeySource::Passphrase("x".into());
        assert!(Sealer::for_state(&state, Some(&passphrase)).is_err());
    }
}
