//! Finding a provider binary: filesystem mirrors, the plugin cache, and (when allowed) a
//! download through the Terraform provider registry protocol, verified by SHA-256.
//!
//! Mirror layout (Terraform's "unpacked" layout):
//! `<mirror>/<host>/<namespace>/<name>/<version>/<os>_<arch>/terraform-provider-<name>[_*]`;
//! the "packed" layout `<mirror>/<host>/<namespace>/<name>/terraform-provider-<name>_<version>_<os>_<arch>.zip`
//! is accepted too and unpacked into the cache. The cache uses the unpacked layout.

use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// `host/namespace/name/version`, e.g. `registry.terraform.io/hashicorp/aws/5.100.0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderAddress {
    pub host: String,
    pub namespace: String,
    pub name: String,
    pub version: String,
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "invalid provider address {0:?}: expected host/namespace/name/version (e.g. registry.terraform.io/hashicorp/aws/5.100.0)"
    )]
    BadAddress(String),
    #[error("provider {address} ({platform}) not found; searched: {}", searched.join(", "))]
    NotFound {
        address: String,
        platform: String,
        searched: Vec<String>,
    },
    #[error("downloading provider {address}: {message}")]
    Download { address: String, message: String },
    #[error(
        "provider {address}: checksum mismatch for {file}: registry says {expected}, file has {actual}"
    )]
    Checksum {
        address: String,
        file: String,
        expected: String,
        actual: String,
    },
    #[error("provider {address}: {path}: {source}")]
    Io {
        address: String,
        path: String,
        source: std::io::Error,
    },
}

impl fmt::Display for ProviderAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.host, self.namespace, self.name, self.version
        )
    }
}

impl ProviderAddress {
    pub fn parse(text: &str) -> Result<Self, InstallError> {
        let parts: Vec<&str> = text.trim().split('/').collect();
        let parts = match parts.as_slice() {
            // `namespace/name/version` means the default registry, as in Terraform.
            [ns, name, version] => ["registry.terraform.io", ns, name, version],
            [host, ns, name, version] => [*host, ns, name, version],
            _ => return Err(InstallError::BadAddress(text.into())),
        };
        if parts
            .iter()
            .any(|p| p.is_empty() || p.contains(char::is_whitespace))
        {
            return Err(InstallError::BadAddress(text.into()));
        }
        Ok(ProviderAddress {
            host: parts[0].into(),
            namespace: parts[1].into(),
            name: parts[2].into(),
            version: parts[3].trim_start_matches('v').into(),
        })
    }

    fn package_dir(&self, root: &Path) -> PathBuf {
        root.join(&self.host)
            .join(&self.namespace)
            .join(&self.name)
            .join(&self.version)
            .join(platform())
    }
}

/// `<os>_<arch>` in Terraform's spelling.
pub fn platform() -> String {
    let os = std::env::consts::OS;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{os}_{arch}")
}

/// Where to look and whether the network may be used.
#[derive(Debug, Clone, Default)]
pub struct InstallConfig {
    pub mirrors: Vec<PathBuf>,
    pub cache_dir: PathBuf,
    /// Allow registry downloads.
    pub online: bool,
    /// Registry hosts spoken to over plain http (local test registries).
    pub insecure_hosts: Vec<String>,
}

/// The executable inside an unpacked package directory.
fn find_executable(dir: &Path, name: &str) -> Option<PathBuf> {
    let prefix = format!("terraform-provider-{name}");
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|f| f.to_str())
                    .is_some_and(|f| f == prefix || f.starts_with(&format!("{prefix}_")))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Find (or fetch) the provider binary.
pub fn install(address: &ProviderAddress, config: &InstallConfig) -> Result<PathBuf, InstallError> {
    let mut searched = Vec::new();
    for mirror in &config.mirrors {
        let dir = address.package_dir(mirror);
        if let Some(exe) = find_executable(&dir, &address.name) {
            return Ok(exe);
        }
        searched.push(dir.display().to_string());
        let packed = mirror
            .join(&address.host)
            .join(&address.namespace)
            .join(&address.name)
            .join(format!(
                "terraform-provider-{}_{}_{}.zip",
                address.name,
                address.version,
                platform()
            ));
        if packed.is_file() {
            let target = address.package_dir(&config.cache_dir);
            let bytes = fs::read(&packed).map_err(|source| InstallError::Io {
                address: address.to_string(),
                path: packed.display().to_string(),
                source,
            })?;
            unpack(address, &bytes, &target)?;
            if let Some(exe) = find_executable(&target, &address.name) {
                return Ok(exe);
            }
        }
        searched.push(packed.display().to_string());
    }
    let cached = address.package_dir(&config.cache_dir);
    if let Some(exe) = find_executable(&cached, &address.name) {
        return Ok(exe);
    }
    searched.push(format!("{} (plugin cache)", cached.display()));
    if !config.online {
        searched.push(format!(
            "registry https://{} (not consulted: offline)",
            address.host
        ));
        return Err(InstallError::NotFound {
            address: address.to_string(),
            platform: platform(),
            searched,
        });
    }
    match download(address, config) {
        Ok(()) => {}
        // A checksum mismatch is its own, louder error; an unreachable or unaware registry is
        // one more place searched.
        Err(e @ InstallError::Checksum { .. }) => return Err(e),
        Err(e) => {
            searched.push(format!("registry {} ({e})", address.host));
            return Err(InstallError::NotFound {
                address: address.to_string(),
                platform: platform(),
                searched,
            });
        }
    }
    find_executable(&cached, &address.name).ok_or_else(|| {
        searched.push(format!("registry {}", address.host));
        InstallError::NotFound {
            address: address.to_string(),
            platform: platform(),
            searched,
        }
    })
}

fn http_get(url: &str) -> Result<Vec<u8>, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(600)))
        .build()
        .into();
    let mut response = agent
        .get(url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let mut body = Vec::new();
    response
        .body_mut()
        .with_config()
        .limit(2 << 30)
        .reader()
        .read_to_end(&mut body)
        .map_err(|e| format!("GET {url}: {e}"))?;
    Ok(body)
}

fn join_url(base: &str, reference: &str) -> String {
    if reference.starts_with("http://") || reference.starts_with("https://") {
        reference.to_string()
    } else if let Some(rest) = reference.strip_prefix('/') {
        // Absolute path: keep scheme and authority of the base.
        let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
        let authority_end = base[scheme_end..]
            .find('/')
            .map(|i| i + scheme_end)
            .unwrap_or(base.len());
        format!("{}/{rest}", &base[..authority_end])
    } else {
        let dir_end = base.rfind('/').map(|i| i + 1).unwrap_or(base.len());
        format!("{}{reference}", &base[..dir_end])
    }
}

/// Registry protocol: service discovery, then the download endpoint, then the archive.
fn download(address: &ProviderAddress, config: &InstallConfig) -> Result<(), InstallError> {
    let err = |message: String| InstallError::Download {
        address: address.to_string(),
        message,
    };
    let scheme = if config.insecure_hosts.iter().any(|h| h == &address.host) {
        "http"
    } else {
        "https"
    };
    let discovery_url = format!("{scheme}://{}/.well-known/terraform.json", address.host);
    let discovery: serde_json::Value =
        serde_json::from_slice(&http_get(&discovery_url).map_err(err)?)
            .map_err(|e| err(format!("{discovery_url}: invalid JSON: {e}")))?;
    let base = discovery
        .get("providers.v1")
        .and_then(|v| v.as_str())
        .ok_or_else(|| err(format!("{discovery_url} names no providers.v1 service")))?;
    let base = join_url(&discovery_url, base);
    let base = if base.ends_with('/') {
        base
    } else {
        format!("{base}/")
    };
    let (os, arch) = platform()
        .split_once('_')
        .map(|(o, a)| (o.to_string(), a.to_string()))
        .unwrap_or_default();
    let meta_url = format!(
        "{base}{}/{}/{}/download/{os}/{arch}",
        address.namespace, address.name, address.version
    );
    let meta: serde_json::Value = serde_json::from_slice(&http_get(&meta_url).map_err(err)?)
        .map_err(|e| err(format!("{meta_url}: invalid JSON: {e}")))?;
    let field = |k: &str| {
        meta.get(k)
            .and_then(|v| v.as_str())
            .ok_or_else(|| err(format!("{meta_url}: response lacks {k}")))
    };
    let filename = field("filename")?.to_string();
    let download_url = join_url(&meta_url, field("download_url")?);
    let expected = field("shasum")?.to_lowercase();
    let archive = http_get(&download_url).map_err(err)?;
    let actual = hex::encode(Sha256::digest(&archive));
    if actual != expected {
        return Err(InstallError::Checksum {
            address: address.to_string(),
            file: filename,
            expected,
            actual,
        });
    }
    // The SHA256SUMS document must list the same digest for the file, when the registry offers it.
    if let Ok(sums_url) = field("shasums_url") {
        let sums = http_get(&join_url(&meta_url, sums_url)).map_err(err)?;
        let listed = String::from_utf8_lossy(&sums)
            .lines()
            .filter_map(|l| l.split_once(char::is_whitespace))
            .any(|(sum, file)| sum.eq_ignore_ascii_case(&expected) && file.trim() == filename);
        if !listed {
            return Err(err(format!(
                "{filename} with digest {expected} is not listed in {sums_url}"
            )));
        }
    }
    unpack(address, &archive, &address.package_dir(&config.cache_dir))
}

/// Unpack a provider zip into `target` (via a temporary sibling directory, renamed at the end,
/// so a half-written package is never found by a later search).
fn unpack(address: &ProviderAddress, archive: &[u8], target: &Path) -> Result<(), InstallError> {
    let io = |path: &Path, source| InstallError::Io {
        address: address.to_string(),
        path: path.display().to_string(),
        source,
    };
    let parent = target.parent().unwrap_or(target);
    fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    let tmp = parent.join(format!(".unpack-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(archive)).map_err(|e| {
        InstallError::Download {
            address: address.to_string(),
            message: format!("invalid zip archive: {e}"),
        }
    })?;
    zip.extract(&tmp).map_err(|e| InstallError::Download {
        address: address.to_string(),
        message: format!("unpacking: {e}"),
    })?;
    #[cfg(unix)]
    if let Some(exe) = find_executable(&tmp, &address.name) {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).map_err(|e| io(&exe, e))?;
    }
    let _ = fs::remove_dir_all(target);
    fs::rename(&tmp, target).map_err(|e| io(target, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    #[test]
    fn parses_addresses() {
        let a = ProviderAddress::parse("registry.terraform.io/hashicorp/aws/5.100.0").unwrap();
        assert_eq!(a.to_string(), "registry.terraform.io/hashicorp/aws/5.100.0");
        assert_eq!(
            ProviderAddress::parse("hashicorp/aws/v5.1.0")
                .unwrap()
                .version,
            "5.1.0"
        );
        assert!(ProviderAddress::parse("aws").is_err());
        assert!(ProviderAddress::parse("a//b/c").is_err());
    }

    #[test]
    fn finds_in_mirror_and_reports_every_place_searched() {
        let mirror = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let address = ProviderAddress::parse("example.com/acme/thing/1.2.3").unwrap();
        let config = InstallConfig {
            mirrors: vec![mirror.path().into()],
            cache_dir: cache.path().into(),
            ..Default::default()
        };
        let err = install(&address, &config).unwrap_err().to_string();
        assert!(err.contains("example.com/acme/thing/1.2.3"), "{err}");
        assert!(err.contains(&mirror.path().display().to_string()), "{err}");
        assert!(err.contains(&cache.path().display().to_string()), "{err}");
        assert!(err.contains("offline"), "{err}");
        let dir = address.package_dir(mirror.path());
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("terraform-provider-thing_v1.2.3_x5"), b"#!").unwrap();
        fs::write(dir.join("LICENSE.txt"), b"").unwrap();
        assert_eq!(
            install(&address, &config).unwrap(),
            dir.join("terraform-provider-thing_v1.2.3_x5")
        );
    }

    fn zip_with(name: &str, content: &[u8]) -> Vec<u8> {
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut w = zip::ZipWriter::new(&mut buf);
            w.start_file(name, zip::write::SimpleFileOptions::default())
                .unwrap();
            w.write_all(content).unwrap();
            w.finish().unwrap();
        }
        buf.into_inner()
    }

    /// A registry on 127.0.0.1 speaking just enough HTTP/1.1 for the installer.
    fn serve(routes: Vec<(String, Vec<u8>)>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    continue;
                }
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let path = request_line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .to_string();
                let (status, body) = match routes.iter().find(|(p, _)| *p == path) {
                    Some((_, body)) => ("200 OK", body.clone()),
                    None => ("404 Not Found", Vec::new()),
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&body);
            }
        });
        host
    }

    fn registry(archive: &[u8], shasum: &str) -> Vec<(String, Vec<u8>)> {
        let (os, arch) = platform()
            .split_once('_')
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .unwrap();
        let filename = format!("terraform-provider-thing_1.0.0_{os}_{arch}.zip");
        let meta = serde_json::json!({
            "protocols": ["6.0"], "os": os, "arch": arch, "filename": filename,
            "download_url": format!("/files/{filename}"),
            "shasums_url": "/files/SHA256SUMS",
            "shasum": shasum,
        });
        vec![
            (
                "/.well-known/terraform.json".into(),
                br#"{"providers.v1":"/v1/providers/"}"#.to_vec(),
            ),
            (
                format!("/v1/providers/acme/thing/1.0.0/download/{os}/{arch}"),
                serde_json::to_vec(&meta).unwrap(),
            ),
            (format!("/files/{filename}"), archive.to_vec()),
            (
                "/files/SHA256SUMS".into(),
                format!("{}  {filename}\n", hex::encode(Sha256::digest(archive))).into_bytes(),
            ),
        ]
    }

    #[test]
    fn unreachable_registry_is_listed_with_the_places_searched() {
        // Bind and drop: nothing listens on this port any more.
        let host = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string();
        let cache = tempfile::tempdir().unwrap();
        let address = ProviderAddress::parse(&format!("{host}/acme/thing/1.0.0")).unwrap();
        let config = InstallConfig {
            mirrors: vec![],
            cache_dir: cache.path().into(),
            online: true,
            insecure_hosts: vec![host.clone()],
        };
        let err = install(&address, &config).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("provider {host}/acme/thing/1.0.0 (")),
            "{err}"
        );
        assert!(
            err.contains(&format!("registry {host} (downloading provider")),
            "{err}"
        );
        assert!(err.contains("plugin cache"), "{err}");
    }

    #[test]
    fn joins_registry_urls() {
        assert_eq!(
            join_url("http://h:1/.well-known/terraform.json", "/v1/providers/"),
            "http://h:1/v1/providers/"
        );
        assert_eq!(join_url("http://h:1/a/b", "c"), "http://h:1/a/c");
        assert_eq!(join_url("http://h:1/a/b", "https://x/y"), "https://x/y");
    }

    #[test]
    fn downloads_from_registry_and_verifies_checksum() {
        let archive = zip_with("terraform-provider-thing_v1.0.0", b"binary");
        let good = hex::encode(Sha256::digest(&archive));
        let host = serve(registry(&archive, &good));
        let cache = tempfile::tempdir().unwrap();
        let address = ProviderAddress::parse(&format!("{host}/acme/thing/1.0.0")).unwrap();
        let config = InstallConfig {
            mirrors: vec![],
            cache_dir: cache.path().into(),
            online: true,
            insecure_hosts: vec![host.clone()],
        };
        let exe = install(&address, &config).unwrap();
        assert_eq!(fs::read(&exe).unwrap(), b"binary");
        assert!(exe.starts_with(cache.path()));
        // Found in the cache the second time, even offline.
        let offline = InstallConfig {
            online: false,
            ..config
        };
        assert_eq!(install(&address, &offline).unwrap(), exe);

        let bad_host = serve(registry(&archive, &"0".repeat(64)));
        let cache2 = tempfile::tempdir().unwrap();
        let address = ProviderAddress::parse(&format!("{bad_host}/acme/thing/1.0.0")).unwrap();
        let config = InstallConfig {
            mirrors: vec![],
            cache_dir: cache2.path().into(),
            online: true,
            insecure_hosts: vec![bad_host.clone()],
        };
        let err = install(&address, &config).unwrap_err();
        assert!(matches!(err, InstallError::Checksum { .. }), "{err}");
        assert!(find_executable(&address.package_dir(cache2.path()), "thing").is_none());
    }
}
