//! OIDC-compatible bearer JWTs: a token signed by a configured issuer's keys (found through
//! its discovery document, `{issuer}/.well-known/openid-configuration` → `jwks_uri`) stands for
//! its subject, with roles from the groups it carries, mapped per project by the server's
//! configuration. Only asymmetric keys are accepted: a shared secret published in a JWKS would
//! let anyone who reads it sign.

use std::collections::{BTreeMap, HashSet};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::{Principal, Role};

/// Why an OIDC token or issuer was refused.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the OIDC issuer {issuer}: {message}")]
    Issuer { issuer: String, message: String },
    #[error("{0}")]
    Token(String),
    #[error("{0}")]
    Config(String),
}

/// A group's role on a project: `--oidc-role GROUP=PROJECT:ROLE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleMapping {
    pub group: String,
    /// A project name, or `*` for every project.
    pub project: String,
    pub role: Role,
}

impl std::str::FromStr for RoleMapping {
    type Err = OidcError;

    fn from_str(text: &str) -> Result<RoleMapping, OidcError> {
        let bad = || {
            OidcError::Config(format!(
                "{text:?} is not GROUP=PROJECT:ROLE (e.g. sre=*:operator, shop-admins=shop:admin)"
            ))
        };
        let (group, rest) = text.split_once('=').ok_or_else(bad)?;
        let (project, role) = rest.rsplit_once(':').ok_or_else(bad)?;
        if group.is_empty() || project.is_empty() {
            return Err(bad());
        }
        let role = match role {
            "viewer" => Role::Viewer,
            "operator" => Role::Operator,
            "approver" => Role::Approver,
            "admin" => Role::Admin,
            other => {
                return Err(OidcError::Config(format!(
                    "{other:?} in {text:?} is not a role: viewer, operator, approver or admin"
                )));
            }
        };
        Ok(RoleMapping {
            group: group.to_string(),
            project: project.to_string(),
            role,
        })
    }
}

/// How tokens of one issuer are checked and mapped.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The `iss` every token must carry, exactly (the discovery document must say the same).
    pub issuer: String,
    /// A value the token's `aud` must contain.
    pub audience: String,
    /// The claim naming the caller in approvals and the audit log.
    pub subject_claim: String,
    /// The claim listing the caller's groups (an array of strings, or one string).
    pub groups_claim: String,
    pub roles: Vec<RoleMapping>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
}

impl OidcConfig {
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> OidcConfig {
        OidcConfig {
            issuer: issuer.into(),
            audience: audience.into(),
            subject_claim: "sub".into(),
            groups_claim: "groups".into(),
            roles: Vec::new(),
            leeway: Duration::from_secs(60),
        }
    }
}

/// Keys are fetched again at most this often when a token names a key not yet seen (a rotated
/// key), so forged key IDs cannot make the server hammer the issuer.
const REFETCH_AT_MOST_EVERY: Duration = Duration::from_secs(30);
/// Keys older than this are fetched again on the next token, so a key the issuer withdrew stops
/// being accepted.
const KEYS_MAX_AGE: Duration = Duration::from_secs(15 * 60);
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Discovery documents and key sets are small; a bigger answer is refused rather than read.
const BODY_LIMIT: u64 = 1 << 20;

struct VerifyingKey {
    kid: Option<String>,
    /// The algorithms this key may verify: its own `alg` when the JWK names one, else every
    /// algorithm of its family.
    algorithms: Vec<Algorithm>,
    key: DecodingKey,
}

struct KeySet {
    keys: Vec<VerifyingKey>,
    fetched: Instant,
}

/// Verifies the issuer's tokens; keys are cached and fetched again on rotation.
pub struct OidcVerifier {
    config: OidcConfig,
    jwks_uri: String,
    keys: RwLock<KeySet>,
    /// Serialises fetches, and remembers when the last one a token asked for was tried.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

#[derive(Deserialize)]
struct RawKeySet {
    keys: Vec<Value>,
}

async fn get_json<T: serde::de::DeserializeOwned + Send + 'static>(
    url: String,
) -> Result<T, String> {
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(FETCH_TIMEOUT))
            .build()
            .into();
        let mut response = agent
            .get(&url)
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?;
        let text = response
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_string()
            .map_err(|e| format!("GET {url}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("GET {url}: not the JSON expected: {e}"))
    })
    .await
    .map_err(|e| format!("fetching: {e}"))?
}

/// The algorithms a key of this kind may verify; None for keys never accepted (shared secrets).
fn family(params: &AlgorithmParameters) -> Option<Vec<Algorithm>> {
    use Algorithm::*;
    match params {
        AlgorithmParameters::RSA(_) => Some(vec![RS256, RS384, RS512, PS256, PS384, PS512]),
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => Some(vec![ES256]),
            EllipticCurve::P384 => Some(vec![ES384]),
            _ => None,
        },
        AlgorithmParameters::OctetKeyPair(okp) => {
            (okp.curve == EllipticCurve::Ed25519).then(|| vec![EdDSA])
        }
        AlgorithmParameters::OctetKey(_) => None,
    }
}

/// The signing keys of a JWKS; keys of other kinds or uses are skipped (an issuer may publish
/// encryption keys and kinds this server does not know beside its signing keys).
fn signing_keys(raw: RawKeySet) -> Vec<VerifyingKey> {
    raw.keys
        .into_iter()
        .filter_map(|value| {
            let jwk: Jwk = serde_json::from_value(value).ok()?;
            if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
                return None;
            }
            let mut algorithms = family(&jwk.algorithm)?;
            if let Some(named) = jwk.common.key_algorithm {
                let named: Algorithm = named.to_string().parse().ok()?;
                if !algorithms.contains(&named) {
                    return None;
                }
                algorithms = vec![named];
            }
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            Some(VerifyingKey {
                kid: jwk.common.key_id,
                algorithms,
                key,
            })
        })
        .collect()
}

impl OidcVerifier {
    /// Reads the issuer's discovery document and keys; fails when either cannot be had, so a
    /// misconfigured server does not start.
    pub async fn discover(config: OidcConfig) -> Result<OidcVerifier, OidcError> {
        if config.audience.is_empty() {
            return Err(OidcError::Config(
                "an OIDC issuer needs an audience (--oidc-audience)".into(),
            ));
        }
        let issuer_err = |message: String| OidcError::Issuer {
            issuer: config.issuer.clone(),
            message,
        };
        let url = format!(
            "{}/.well-known/openid-configuration",
            config.issuer.trim_end_matches('/')
        );
        let discovery: Discovery = get_json(url).await.map_err(issuer_err)?;
        if discovery.issuer != config.issuer {
            return Err(issuer_err(format!(
                "its discovery document names the issuer {:?}; tokens must carry the same",
                discovery.issuer
            )));
        }
        let keys = signing_keys(
            get_json(discovery.jwks_uri.clone())
                .await
                .map_err(issuer_err)?,
        );
        if keys.is_empty() {
            return Err(issuer_err(format!(
                "{} publishes no signing key this server accepts (RSA, P-256, P-384 or Ed25519)",
                discovery.jwks_uri
            )));
        }
        let now = Instant::now();
        Ok(OidcVerifier {
            config,
            jwks_uri: discovery.jwks_uri,
            keys: RwLock::new(KeySet { keys, fetched: now }),
            fetching: tokio::sync::Mutex::new(None),
        })
    }

    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// Fetches the keys again unless another request just did (or tried to).
    async fn refetch(&self, fetched_before: Instant) {
        let mut last_try = self.fetching.lock().await;
        if self.keys.read().unwrap_or_else(|p| p.into_inner()).fetched > fetched_before {
            return; // fetched while this request waited
        }
        if last_try.is_some_and(|at| at.elapsed() < REFETCH_AT_MOST_EVERY) {
            return;
        }
        *last_try = Some(Instant::now());
        match get_json::<RawKeySet>(self.jwks_uri.clone()).await {
            Ok(raw) => {
                let keys = signing_keys(raw);
                let mut set = self.keys.write().unwrap_or_else(|p| p.into_inner());
                set.keys = keys;
                set.fetched = Instant::now();
            }
            // Keep the keys last read: the issuer being briefly unreachable should not lock
            // everyone out.
            Err(e) => tracing::warn!(issuer = %self.config.issuer, "refreshing the OIDC keys: {e}"),
        }
    }

    /// The claims of `token` when one of the issuer's keys signed it and it is valid now for
    /// this audience.
    fn check(&self, token: &str, header: &jsonwebtoken::Header) -> Result<Value, Checked> {
        let set = self.keys.read().unwrap_or_else(|p| p.into_inner());
        let candidates: Vec<&VerifyingKey> = set
            .keys
            .iter()
            .filter(|k| header.kid.is_none() || k.kid == header.kid)
            .filter(|k| k.algorithms.contains(&header.alg))
            .collect();
        if candidates.is_empty() {
            // A key ID the issuer has not published (or none) may be a rotated key; a known
            // one with the wrong algorithm is not, and is refused without asking the issuer.
            let known = header.kid.is_some() && set.keys.iter().any(|k| k.kid == header.kid);
            return Err(if known {
                Checked::Invalid(format!(
                    "the token's algorithm {:?} does not fit the issuer's key {:?}",
                    header.alg,
                    header.kid.as_deref().unwrap_or_default()
                ))
            } else {
                Checked::NoKey(set.fetched)
            });
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let mut last = None;
        for key in candidates {
            match jsonwebtoken::decode::<Value>(token, &key.key, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(e) => last = Some(e),
            }
        }
        Err(Checked::Invalid(describe(last)))
    }

    /// The principal a JWT stands for.
    pub async fn verify(&self, token: &str) -> Result<Principal, OidcError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| OidcError::Token(format!("the token is not a JWT: {e}")))?;
        let keys_age = self.keys.read().unwrap_or_else(|p| p.into_inner()).fetched;
        if keys_age.elapsed() > KEYS_MAX_AGE {
            self.refetch(keys_age).await;
        }
        let claims = match self.check(token, &header) {
            Ok(claims) => claims,
            Err(Checked::NoKey(fetched)) => {
                self.refetch(fetched).await;
                match self.check(token, &header) {
                    Ok(claims) => claims,
                    Err(Checked::NoKey(_)) => {
                        return Err(OidcError::Token(format!(
                            "no key of the issuer verifies {:?} tokens{}",
                            header.alg,
                            header
                                .kid
                                .as_deref()
                                .map(|k| format!(" with key ID {k:?}"))
                                .unwrap_or_default()
                        )));
                    }
                    Err(Checked::Invalid(why)) => return Err(OidcError::Token(why)),
                }
            }
            Err(Checked::Invalid(why)) => return Err(OidcError::Token(why)),
        };
        self.principal(token, &claims)
    }

    fn principal(&self, token: &str, claims: &Value) -> Result<Principal, OidcError> {
        let subject = claims
            .get(&self.config.subject_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                OidcError::Token(format!(
                    "the token has no {:?} claim naming its subject",
                    self.config.subject_claim
                ))
            })?;
        let groups: HashSet<&str> = match claims.get(&self.config.groups_claim) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(one)) => [one.as_str()].into(),
            _ => HashSet::new(),
        };
        let mut scopes: BTreeMap<String, Role> = BTreeMap::new();
        for mapping in &self.config.roles {
            if groups.contains(mapping.group.as_str()) {
                let slot = scopes
                    .entry(mapping.project.clone())
                    .or_insert(mapping.role);
                *slot = (*slot).max(mapping.role);
            }
        }
        // The audit log names a JWT by its `jti`, else by a hash prefix: never the token.
        let id = claims
            .get("jti")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| crate::auth::hash_token(token)[..16].to_string());
        Ok(Principal {
            token_id: format!("oidc:{id}"),
            subject: subject.to_string(),
            scopes,
        })
    }
}

enum Checked {
    /// No key fits the token's `kid` and algorithm (as of the keys fetched then).
    NoKey(Instant),
    Invalid(String),
}

/// Why a signed token was refused, in words a caller can act on (RFC 6750 `error_description`).
fn describe(error: Option<jsonwebtoken::errors::Error>) -> String {
    use jsonwebtoken::errors::ErrorKind;
    let Some(error) = error else {
        return "the token is not valid".into();
    };
    match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidIssuer => "the token was issued by another issuer".into(),
        ErrorKind::InvalidAudience => "the token is meant for another audience".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim:?} claim"),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not fit the key".into(),
        _ => format!("the token is not valid: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_mappings_parse_and_refuse_nonsense() {
        let m: RoleMapping = "sre=*:operator".parse().unwrap();
        assert_eq!(
            m,
            RoleMapping {
                group: "sre".into(),
                project: "*".into(),
                role: Role::Operator
            }
        );
        let m: RoleMapping = "team:a=shop:admin".parse().unwrap();
        assert_eq!((m.group.as_str(), m.project.as_str()), ("team:a", "shop"));
        for bad in [
            "sre",
            "sre=shop",
            "=shop:admin",
            "sre=:admin",
            "sre=shop:root",
        ] {
            assert!(bad.parse::<RoleMapping>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shared_secret_keys_are_never_signing_keys() {
        let raw = RawKeySet {
            keys: vec![
                serde_json::json!({"kty": "oct", "k": "c2VjcmV0", "kid": "s"}),
                serde_json::json!({"kty": "unknown-kind"}),
            ],
        };
        assert!(signing_keys(raw).is_empty());
    }
}
