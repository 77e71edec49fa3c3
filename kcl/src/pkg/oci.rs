//! A small OCI distribution client (the registry HTTP API v2): manifests, blobs, tags, and
//! pushes, with Basic and Bearer-token authentication. Blocking, over `ureq` (already in the
//! workspace): the evaluator is synchronous, and the async clients would bring an HTTP stack and
//! a runtime into every `kcl` process for a handful of requests.
//!
//! Packages are published as upstream kpm publishes them (oras `PackManifest`, image-spec 1.1):
//! an image manifest with `artifactType` `application/vnd.oci.image.layer.v1.tar`, the empty
//! config, one layer of that media type holding the package tarball (titled
//! `<name>_<version>.tar`), and the `org.kcllang.package.*` annotations.

use std::io::Read;
use std::sync::Mutex;

use base64::Engine;
use sha2::{Digest, Sha256};
use ureq::http;

use super::auth::{self, Credential};
use super::{PkgError, Settings};

/// Media type of a package layer (and the manifest's `artifactType`).
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
/// OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// The empty config of an artifact (`{}`).
pub const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";

/// Manifest annotations upstream writes and reads.
pub const ANNOTATION_NAME: &str = "org.kcllang.package.name";
pub const ANNOTATION_VERSION: &str = "org.kcllang.package.version";
pub const ANNOTATION_DESCRIPTION: &str = "org.kcllang.package.description";
pub const ANNOTATION_SUM: &str = "org.kcllang.package.sum";
pub const ANNOTATION_CREATED: &str = "org.opencontainers.image.created";
pub const ANNOTATION_TITLE: &str = "org.opencontainers.image.title";

/// `sha256:<hex>` of `data`.
pub fn digest_of(data: &[u8]) -> String {
    let h = Sha256::digest(data);
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in h {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A fetched manifest.
#[derive(Debug)]
pub struct Manifest {
    pub digest: String,
    pub json: serde_json::Value,
}

impl Manifest {
    /// The manifest's annotations.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.json.get("annotations")?.get(key)?.as_str()
    }

    /// The package layer: the first layer of a tar media type (or titled `.tar`/`.tgz`).
    pub fn package_layer(&self) -> Option<(&str, &str)> {
        let layers = self.json.get("layers")?.as_array()?;
        layers.iter().find_map(|l| {
            let mt = l.get("mediaType")?.as_str()?;
            let title = l
                .get("annotations")
                .and_then(|a| a.get(ANNOTATION_TITLE))
                .and_then(|t| t.as_str())
                .unwrap_or("");
            let tarish = mt.contains("tar")
                || title.ends_with(".tar")
                || title.ends_with(".tgz")
                || title.ends_with(".tar.gz");
            tarish.then(|| l.get("digest")?.as_str().map(|d| (d, title)))?
        })
    }
}

enum AuthState {
    None,
    Basic,
    Bearer(String),
}

/// A client for one registry host.
pub struct Client {
    agent: ureq::Agent,
    host: String,
    base: String,
    cred: Option<Credential>,
    cred_files: Vec<std::path::PathBuf>,
    state: Mutex<AuthState>,
}

impl Client {
    /// A client for `host` (`name[:port]`) with the settings' plain-HTTP rule and the
    /// credentials found for it.
    pub fn new(settings: &Settings, host: &str) -> Result<Client, PkgError> {
        let scheme = if settings.plain_http_for(host) {
            "http"
        } else {
            "https"
        };
        let cred_files = auth::config_files(&settings.credentials_file);
        let cred = auth::lookup(host, &cred_files)?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(std::time::Duration::from_secs(30)))
            .timeout_global(Some(std::time::Duration::from_secs(600)))
            .user_agent(concat!("kcl/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Client {
            agent: ureq::Agent::new_with_config(config),
            host: host.to_string(),
            base: format!("{scheme}://{host}"),
            cred,
            cred_files,
            state: Mutex::new(AuthState::None),
        })
    }

    /// `oci://host/repo` for messages.
    pub fn url(&self, repo: &str) -> String {
        format!("oci://{}/{repo}", self.host)
    }

    fn remote(&self, msg: String) -> PkgError {
        PkgError::Remote(msg)
    }

    /// Sends a request, answering an authentication challenge once.
    fn send(
        &self,
        method: http::Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        scope: &str,
    ) -> Result<http::Response<ureq::Body>, PkgError> {
        let mut retried = false;
        loop {
            let mut b = http::Request::builder().method(method.clone()).uri(url);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            if let Some(a) = self.auth_header() {
                b = b.header("Authorization", a);
            }
            let sent = match body {
                Some(data) => b
                    .body(data)
                    .map_err(|e| self.remote(format!("{url}: {e}")))
                    .and_then(|r| {
                        self.agent
                            .run(r)
                            .map_err(|e| self.remote(format!("{method} {url}: {e}")))
                    }),
                None => b
                    .body(())
                    .map_err(|e| self.remote(format!("{url}: {e}")))
                    .and_then(|r| {
                        self.agent
                            .run(r)
                            .map_err(|e| self.remote(format!("{method} {url}: {e}")))
                    }),
            }
            .map_err(|e| PkgError::Remote(format!("cannot reach registry {}: {e}", self.host)))?;
            if sent.status() != http::StatusCode::UNAUTHORIZED || retried {
                if sent.status() == http::StatusCode::UNAUTHORIZED {
                    return Err(self.denied());
                }
                return Ok(sent);
            }
            retried = true;
            let challenge = sent
                .headers()
                .get("WWW-Authenticate")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            self.answer(&challenge, scope)?;
        }
    }

    fn auth_header(&self) -> Option<String> {
        match &*self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            AuthState::None => None,
            AuthState::Basic => self.cred.as_ref().map(basic),
            AuthState::Bearer(t) => Some(format!("Bearer {t}")),
        }
    }

    fn denied(&self) -> PkgError {
        match &self.cred {
            Some(c) => PkgError::Remote(format!(
                "registry {} refused the credentials of user '{}' (from {})",
                self.host,
                c.username,
                self.files_list()
            )),
            None => PkgError::Remote(format!(
                "registry {} requires a login and there are no credentials for it in {}",
                self.host,
                self.files_list()
            )),
        }
    }

    fn files_list(&self) -> String {
        self.cred_files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// Answers a `WWW-Authenticate` challenge: Basic with the stored credential, or a Bearer
    /// token from the realm it names.
    fn answer(&self, challenge: &str, scope: &str) -> Result<(), PkgError> {
        let (scheme, params) = parse_challenge(challenge);
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => {
                if self.cred.is_none() {
                    return Err(self.denied());
                }
                *self.state.lock().unwrap_or_else(|e| e.into_inner()) = AuthState::Basic;
                Ok(())
            }
            "bearer" => {
                let realm = params
                    .iter()
                    .find(|(k, _)| k == "realm")
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| {
                        self.remote(format!(
                            "registry {}: Bearer challenge without a realm",
                            self.host
                        ))
                    })?;
                let mut q = Vec::new();
                if let Some((_, s)) = params.iter().find(|(k, _)| k == "service") {
                    q.push(format!("service={}", enc(s)));
                }
                let scope = params
                    .iter()
                    .find(|(k, _)| k == "scope")
                    .map(|(_, v)| v.as_str())
                    .unwrap_or(scope);
                if !scope.is_empty() {
                    q.push(format!("scope={}", enc(scope)));
                }
                let url = if q.is_empty() {
                    realm
                } else {
                    format!(
                        "{realm}{}{}",
                        if realm.contains('?') { '&' } else { '?' },
                        q.join("&")
                    )
                };
                let mut req = self.agent.get(&url);
                if let Some(c) = &self.cred {
                    req = req.header("Authorization", basic(c));
                }
                let mut resp = req
                    .call()
                    .map_err(|e| self.remote(format!("token service {url}: {e}")))?;
                if !resp.status().is_success() {
                    return Err(self.denied());
                }
                let v: serde_json::Value = read_all(&mut resp, 1 << 20)
                    .map_err(|e| e.to_string())
                    .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
                    .map_err(|e| self.remote(format!("token service {url}: {e}")))?;
                let token = v
                    .get("token")
                    .or_else(|| v.get("access_token"))
                    .and_then(|t| t.as_str())
                    .ok_or_else(|| self.remote(format!("token service {url} sent no token")))?;
                *self.state.lock().unwrap_or_else(|e| e.into_inner()) =
                    AuthState::Bearer(token.to_string());
                Ok(())
            }
            _ => Err(self.remote(format!(
                "registry {} asks for an unsupported authentication: '{challenge}'",
                self.host
            ))),
        }
    }

    fn status_error(&self, what: &str, mut resp: http::Response<ureq::Body>) -> PkgError {
        let status = resp.status();
        let body = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .unwrap_or_default();
        let detail = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                let e = v.get("errors")?.get(0)?;
                Some(format!(
                    "{} {}",
                    e.get("code")?.as_str()?,
                    e.get("message").and_then(|m| m.as_str()).unwrap_or("")
                ))
            })
            .unwrap_or_else(|| body.trim().chars().take(200).collect());
        PkgError::Remote(format!("{what}: {status} {detail}").trim_end().to_string())
    }

    fn pull_scope(repo: &str) -> String {
        format!("repository:{repo}:pull")
    }

    /// The manifest `repo:reference` (an image index resolves to its first manifest).
    pub fn manifest(&self, repo: &str, reference: &str) -> Result<Manifest, PkgError> {
        let url = format!("{}/v2/{repo}/manifests/{reference}", self.base);
        let accept = [
            MANIFEST_MEDIA_TYPE,
            DOCKER_MANIFEST,
            INDEX_MEDIA_TYPE,
            DOCKER_LIST,
        ]
        .join(", ");
        let mut resp = self.send(
            http::Method::GET,
            &url,
            &[("Accept", &accept)],
            None,
            &Self::pull_scope(repo),
        )?;
        let what = format!("{}:{reference}", self.url(repo));
        if resp.status() == http::StatusCode::NOT_FOUND {
            return Err(PkgError::Remote(format!(
                "{what}: not found in the registry"
            )));
        }
        if !resp.status().is_success() {
            return Err(self.status_error(&what, resp));
        }
        let raw = read_all(&mut resp, 16 << 20).map_err(|e| self.remote(format!("{what}: {e}")))?;
        let digest = digest_of(&raw);
        if let Some(d) = resp
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|v| v.to_str().ok())
            && d.starts_with("sha256:")
            && d != digest
        {
            return Err(PkgError::Checksum(format!(
                "{what}: the manifest received does not match its digest {d}"
            )));
        }
        if reference.starts_with("sha256:") && reference != digest {
            return Err(PkgError::Checksum(format!(
                "{what}: the manifest received does not match the digest asked for"
            )));
        }
        let json: serde_json::Value = serde_json::from_slice(&raw)
            .map_err(|e| self.remote(format!("{what}: the manifest is not JSON: {e}")))?;
        let mt = json.get("mediaType").and_then(|m| m.as_str()).unwrap_or("");
        if mt == INDEX_MEDIA_TYPE || mt == DOCKER_LIST || json.get("manifests").is_some() {
            let first = json
                .get("manifests")
                .and_then(|m| m.get(0))
                .and_then(|m| m.get("digest"))
                .and_then(|d| d.as_str())
                .ok_or_else(|| self.remote(format!("{what}: an empty image index")))?
                .to_string();
            return self.manifest(repo, &first);
        }
        Ok(Manifest { digest, json })
    }

    /// The blob `digest` of `repo`, checked against its digest.
    pub fn blob(&self, repo: &str, digest: &str) -> Result<Vec<u8>, PkgError> {
        let url = format!("{}/v2/{repo}/blobs/{digest}", self.base);
        let what = format!("{}@{digest}", self.url(repo));
        let mut resp = self.send(http::Method::GET, &url, &[], None, &Self::pull_scope(repo))?;
        if !resp.status().is_success() {
            return Err(self.status_error(&what, resp));
        }
        let data =
            read_all(&mut resp, u64::MAX).map_err(|e| self.remote(format!("{what}: {e}")))?;
        if let Some(hex) = digest.strip_prefix("sha256:")
            && digest_of(&data)[7..] != *hex
        {
            return Err(PkgError::Checksum(format!(
                "{what}: the content received does not match its digest (corrupted or tampered in the registry)"
            )));
        }
        Ok(data)
    }

    /// The tags of `repo` (none when the repository does not exist).
    pub fn tags(&self, repo: &str) -> Result<Vec<String>, PkgError> {
        let mut url = format!("{}/v2/{repo}/tags/list", self.base);
        let mut out = Vec::new();
        for _ in 0..1000 {
            let mut resp =
                self.send(http::Method::GET, &url, &[], None, &Self::pull_scope(repo))?;
            if resp.status() == http::StatusCode::NOT_FOUND {
                return Ok(out);
            }
            if !resp.status().is_success() {
                return Err(self.status_error(&format!("tags of {}", self.url(repo)), resp));
            }
            let next = resp
                .headers()
                .get("Link")
                .and_then(|v| v.to_str().ok())
                .and_then(|l| {
                    l.split_once('<')?
                        .1
                        .split_once('>')
                        .map(|(u, _)| u.to_string())
                });
            let v: serde_json::Value = read_all(&mut resp, 16 << 20)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
                .map_err(|e| self.remote(format!("tags of {}: {e}", self.url(repo))))?;
            if let Some(tags) = v.get("tags").and_then(|t| t.as_array()) {
                out.extend(tags.iter().filter_map(|t| t.as_str().map(str::to_string)));
            }
            match next {
                Some(n) if n.starts_with('/') => url = format!("{}{n}", self.base),
                Some(n) => url = n,
                None => break,
            }
        }
        Ok(out)
    }

    fn push_scope(repo: &str) -> String {
        format!("repository:{repo}:pull,push")
    }

    /// Uploads `data` as a blob of `repo` unless the registry has it.
    pub fn push_blob(&self, repo: &str, data: &[u8]) -> Result<String, PkgError> {
        let digest = digest_of(data);
        let scope = Self::push_scope(repo);
        let head = self.send(
            http::Method::HEAD,
            &format!("{}/v2/{repo}/blobs/{digest}", self.base),
            &[],
            None,
            &scope,
        )?;
        if head.status().is_success() {
            return Ok(digest);
        }
        let what = format!("upload to {}", self.url(repo));
        let start = self.send(
            http::Method::POST,
            &format!("{}/v2/{repo}/blobs/uploads/", self.base),
            &[("Content-Length", "0")],
            None,
            &scope,
        )?;
        if start.status() != http::StatusCode::ACCEPTED {
            return Err(self.status_error(&what, start));
        }
        let loc = start
            .headers()
            .get("Location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| self.remote(format!("{what}: no upload location")))?;
        let loc = if loc.starts_with('/') {
            format!("{}{loc}", self.base)
        } else {
            loc.to_string()
        };
        let sep = if loc.contains('?') { '&' } else { '?' };
        let put = self.send(
            http::Method::PUT,
            &format!("{loc}{sep}digest={}", enc(&digest)),
            &[("Content-Type", "application/octet-stream")],
            Some(data),
            &scope,
        )?;
        if put.status() != http::StatusCode::CREATED {
            return Err(self.status_error(&what, put));
        }
        Ok(digest)
    }

    /// Stores `manifest` (an OCI image manifest) as `repo:tag`; returns its digest.
    pub fn push_manifest(
        &self,
        repo: &str,
        tag: &str,
        manifest: &[u8],
    ) -> Result<String, PkgError> {
        let resp = self.send(
            http::Method::PUT,
            &format!("{}/v2/{repo}/manifests/{tag}", self.base),
            &[("Content-Type", MANIFEST_MEDIA_TYPE)],
            Some(manifest),
            &Self::push_scope(repo),
        )?;
        if resp.status() != http::StatusCode::CREATED {
            return Err(self.status_error(&format!("{}:{tag}", self.url(repo)), resp));
        }
        Ok(digest_of(manifest))
    }
}

fn basic(c: &Credential) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.username, c.password))
    )
}

fn read_all(resp: &mut http::Response<ureq::Body>, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    resp.body_mut()
        .as_reader()
        .take(limit)
        .read_to_end(&mut out)?;
    Ok(out)
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `Bearer realm="...",service="...",scope="..."` into the scheme and its parameters.
fn parse_challenge(h: &str) -> (String, Vec<(String, String)>) {
    let h = h.trim();
    let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
    let mut params = Vec::new();
    let mut s = rest.trim();
    while !s.is_empty() {
        let Some((k, v)) = s.split_once('=') else {
            break;
        };
        let k = k.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let v = v.trim_start();
        let (val, after) = if let Some(q) = v.strip_prefix('"') {
            let end = q.find('"').unwrap_or(q.len());
            (q[..end].to_string(), q.get(end + 1..).unwrap_or(""))
        } else {
            let end = v.find(',').unwrap_or(v.len());
            (v[..end].trim().to_string(), &v[end..])
        };
        params.push((k, val));
        s = after.trim_start().trim_start_matches(',').trim_start();
    }
    (scheme.to_string(), params)
}

/// The manifest upstream kpm pushes for a package tarball (`layer_digest`, `layer_size`,
/// titled `title`), with the package annotations.
pub fn package_manifest(
    layer_digest: &str,
    layer_size: usize,
    title: &str,
    annotations: &[(&str, String)],
) -> Vec<u8> {
    let empty = b"{}";
    let mut ann = serde_json::Map::new();
    let mut sorted: Vec<_> = annotations.to_vec();
    sorted.sort();
    for (k, v) in sorted {
        ann.insert(k.to_string(), serde_json::Value::String(v));
    }
    let m = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": LAYER_MEDIA_TYPE,
        "config": {
            "mediaType": EMPTY_CONFIG_MEDIA_TYPE,
            "digest": digest_of(empty),
            "size": empty.len(),
            "data": base64::engine::general_purpose::STANDARD.encode(empty),
        },
        "layers": [{
            "mediaType": LAYER_MEDIA_TYPE,
            "digest": layer_digest,
            "size": layer_size,
            "annotations": { ANNOTATION_TITLE: title },
        }],
        "annotations": ann,
    });
    serde_json::to_vec(&m).unwrap_or_default()
}

/// The newest of `tags` by semantic version (tags that are not versions are ignored), as
/// upstream picks a dependency without a tag.
pub fn latest_tag(tags: &[String]) -> Option<String> {
    tags.iter()
        .filter_map(|t| super::version::Version::parse(t).map(|v| (v, t)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, t)| t.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges() {
        let (s, p) = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#,
        );
        assert_eq!(s, "Bearer");
        assert_eq!(p[0], ("realm".into(), "https://auth.example/token".into()));
        assert_eq!(p[2], ("scope".into(), "repository:a/b:pull".into()));
        let (s, p) = parse_challenge(r#"Basic realm="basic-realm""#);
        assert_eq!((s.as_str(), p.len()), ("Basic", 1));
    }

    #[test]
    fn manifest_has_upstream_shape() {
        let m = package_manifest(
            "sha256:ab",
            10,
            "p_0.1.0.tar",
            &[(ANNOTATION_NAME, "p".into()), (ANNOTATION_SUM, "s".into())],
        );
        let v: serde_json::Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(v["artifactType"], LAYER_MEDIA_TYPE);
        assert_eq!(
            v["config"]["digest"],
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            v["layers"][0]["annotations"][ANNOTATION_TITLE],
            "p_0.1.0.tar"
        );
        assert_eq!(v["annotations"][ANNOTATION_NAME], "p");
    }

    #[test]
    fn newest_semver_tag() {
        let t: Vec<String> = ["0.1.0", "0.10.0", "0.9.1", "latest", "v0.2.0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(latest_tag(&t).as_deref(), Some("0.10.0"));
    }
}
