//! What must hold before any plugin code runs: checked on files, never by loading them.
//!
//! - **Ownership and modes** (as ssh's StrictModes): the plugin directory, the plugin's own
//!   directory, its manifest and its file must belong to this user or root and must not be
//!   writable by group or others; anyone who could rewrite them could run code as this user.
//! - **Containment**: a manifest's `file` is a relative path that stays inside the manifest's
//!   directory (no `..`, no absolute path, no symlink leading out).
//! - **Content**: checksum, signature and "is this a kusion plugin" are checked on one read of
//!   the file; since neither it nor its directories can be changed by anyone but this user or
//!   root (checked above), the loader then opens the bytes that were checked. (Loading through
//!   `/proc/self/fd/N` was tried: the dynamic loader matches libraries by name, and a reused
//!   descriptor number returned a different, earlier library.)
//! - **A kusion plugin at all**: a native library must export `kusion_plugin_decl` in its
//!   dynamic symbol table, read from the ELF file, before `dlopen` runs its constructors.
//! - **Publisher signatures** (optional, required with `require_signatures`): an ed25519
//!   signature over the plugin's name, version and checksum by a key in `trusted_keys`.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::signature::{self, KeyPair};
use sha2::{Digest, Sha256};

use super::LoadError;
use super::manifest::Manifest;

/// Refuse `path` if someone other than this user (or root) owns it or could write it.
pub fn check_private(path: &Path) -> Result<(), LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| LoadError::Open {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let me = current_uid();
    let mode = meta.mode() & 0o7777;
    let unsafe_reason = if meta.uid() != me && meta.uid() != 0 {
        Some(format!(
            "it belongs to uid {}, not to this user (uid {me}) or root",
            meta.uid()
        ))
    } else if mode & 0o022 != 0 {
        Some(format!(
            "it is writable by {} (mode {mode:04o}); fix with `chmod go-w {}`",
            if mode & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            path.display()
        ))
    } else {
        None
    };
    match unsafe_reason {
        Some(reason) => Err(LoadError::Unsafe {
            path: path.to_path_buf(),
            detail: reason,
        }),
        None => Ok(()),
    }
}

fn current_uid() -> u32 {
    // The owner of a file this process just created would need a write; /proc/self is ours.
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

/// The plugin file of `manifest`, resolved inside the manifest's directory.
pub fn contained_file(manifest: &Manifest, manifest_path: &Path) -> Result<PathBuf, LoadError> {
    let dir = manifest_path.parent().unwrap_or(Path::new("."));
    let relative = Path::new(&manifest.file);
    let escapes = relative.is_absolute()
        || relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes {
        return Err(LoadError::Manifest {
            path: manifest_path.to_path_buf(),
            detail: format!(
                "`file = {:?}` must name a file inside the manifest's directory (no `..`, no absolute path)",
                manifest.file
            ),
        });
    }
    let file = dir.join(relative);
    // A symlink inside the directory may still lead out of it.
    if let (Ok(real_dir), Ok(real_file)) = (dir.canonicalize(), file.canonicalize())
        && !real_file.starts_with(&real_dir)
    {
        return Err(LoadError::Manifest {
            path: manifest_path.to_path_buf(),
            detail: format!(
                "`file = {:?}` resolves to {}, outside the manifest's directory",
                manifest.file,
                real_file.display()
            ),
        });
    }
    Ok(file)
}

/// A plugin file read once, its bytes checked.
pub struct Verified {
    bytes: Vec<u8>,
    path: PathBuf,
}

impl Verified {
    /// Reads the file at `path` whole (what is checked is what is loaded).
    pub fn open(path: &Path) -> Result<Verified, LoadError> {
        let open = |e: std::io::Error| LoadError::Open {
            path: path.to_path_buf(),
            detail: e.to_string(),
        };
        let mut file = File::open(path).map_err(open)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(open)?;
        Ok(Verified {
            bytes,
            path: path.to_path_buf(),
        })
    }

    /// The bytes' hex SHA-256.
    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Refuse a native library that does not export `symbol` (read from the ELF dynamic
    /// symbol table, so nothing in it runs).
    pub fn require_export(&self, symbol: &str) -> Result<(), LoadError> {
        use object::{Object, ObjectSymbol};
        let not_plugin = |detail: String| LoadError::NotAPlugin {
            path: self.path.clone(),
            detail,
        };
        let parsed = object::File::parse(&*self.bytes)
            .map_err(|e| not_plugin(format!("not a shared library this host can read: {e}")))?;
        let exported = parsed
            .dynamic_symbols()
            .any(|s| s.is_definition() && s.name() == Ok(symbol));
        if exported {
            Ok(())
        } else {
            Err(not_plugin(format!(
                "it exports no `{symbol}` (was it built with a kusion_sdk export macro?); it was not loaded"
            )))
        }
    }
}

/// The text a publisher signs: it binds the name, the version and the exact file.
pub fn signed_text(manifest: &Manifest, sha256: &str) -> String {
    format!(
        "kusion-plugin-v1\nname={}\nversion={}\nkind={}\nsha256={}\n",
        manifest.name,
        manifest.version,
        manifest.kind,
        sha256.to_ascii_lowercase()
    )
}

/// Check `manifest.signature` against the trusted keys (`name -> base64 ed25519 public key`).
/// No signature is fine unless `required`.
pub fn check_signature(
    manifest: &Manifest,
    manifest_path: &Path,
    sha256: &str,
    trusted: &std::collections::BTreeMap<String, String>,
    required: bool,
) -> Result<(), LoadError> {
    let refuse = |detail: String| LoadError::Signature {
        path: manifest_path.to_path_buf(),
        detail,
    };
    let Some(sig) = &manifest.signature else {
        return if required {
            Err(refuse(
                "unsigned, and `require_signatures` is set in the plugin configuration".into(),
            ))
        } else {
            Ok(())
        };
    };
    let publisher = manifest.publisher.as_deref().unwrap_or("");
    let Some(key) = trusted.get(publisher) else {
        return Err(refuse(format!(
            "signed by {publisher:?}, which is not among the trusted keys ([plugins.trusted_keys])"
        )));
    };
    let key = B64
        .decode(key.trim())
        .map_err(|e| refuse(format!("trusted key {publisher:?} is not base64: {e}")))?;
    let sig = B64
        .decode(sig.trim())
        .map_err(|e| refuse(format!("`signature` is not base64: {e}")))?;
    signature::UnparsedPublicKey::new(&signature::ED25519, key)
        .verify(signed_text(manifest, sha256).as_bytes(), &sig)
        .map_err(|_| {
            refuse(format!(
                "the signature does not match (publisher {publisher:?}): the plugin was changed after signing, or signed with another key"
            ))
        })
}

/// A new ed25519 key pair as PKCS#8 bytes (for `kusionctl plugin keygen`).
pub fn generate_key() -> Result<Vec<u8>, String> {
    signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
        .map(|k| k.as_ref().to_vec())
        .map_err(|_| "cannot generate a key".to_string())
}

/// The base64 public key of a PKCS#8 key pair.
pub fn public_key(pkcs8: &[u8]) -> Result<String, String> {
    let pair = signature::Ed25519KeyPair::from_pkcs8(pkcs8)
        .map_err(|e| format!("not an ed25519 PKCS#8 key: {e}"))?;
    Ok(B64.encode(pair.public_key().as_ref()))
}

/// Sign a manifest's plugin (for `kusionctl plugin sign`): the base64 signature.
pub fn sign(pkcs8: &[u8], manifest: &Manifest, sha256: &str) -> Result<String, String> {
    let pair = signature::Ed25519KeyPair::from_pkcs8(pkcs8)
        .map_err(|e| format!("not an ed25519 PKCS#8 key: {e}"))?;
    Ok(B64.encode(pair.sign(signed_text(manifest, sha256).as_bytes()).as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kusion_sdk::abi::PluginKind;
    use std::os::unix::fs::PermissionsExt;

    fn manifest(file: &str) -> Manifest {
        Manifest {
            name: "x".into(),
            kind: PluginKind::Runtime,
            version: "1.0.0".into(),
            file: file.into(),
            format: None,
            sha256: None,
            permissions: Default::default(),
            publisher: None,
            signature: None,
        }
    }

    #[test]
    fn files_writable_by_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lib.so");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        check_private(&f).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_private(&f).unwrap_err().to_string();
        assert!(
            e.contains("writable by everyone") && e.contains("chmod go-w"),
            "{e}"
        );
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = check_private(dir.path()).unwrap_err().to_string();
        assert!(e.contains("its group"), "{e}");
    }

    #[test]
    fn files_outside_the_manifest_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plugin = dir.path().join("p");
        std::fs::create_dir(&plugin).unwrap();
        std::fs::write(dir.path().join("evil.so"), b"x").unwrap();
        let path = plugin.join("plugin.toml");
        for bad in ["../evil.so", "/etc/passwd", "a/../../evil.so"] {
            let e = contained_file(&manifest(bad), &path)
                .unwrap_err()
                .to_string();
            assert!(e.contains("inside the manifest's directory"), "{bad}: {e}");
        }
        std::os::unix::fs::symlink(dir.path().join("evil.so"), plugin.join("link.so")).unwrap();
        let e = contained_file(&manifest("link.so"), &path)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the manifest's directory"), "{e}");
        std::fs::write(plugin.join("ok.so"), b"x").unwrap();
        assert_eq!(
            contained_file(&manifest("ok.so"), &path).unwrap(),
            plugin.join("ok.so")
        );
    }

    #[test]
    fn libraries_without_the_plugin_symbol_are_refused_unopened() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lib.so");
        std::fs::write(&f, b"not an ELF file").unwrap();
        let e = Verified::open(&f)
            .unwrap()
            .require_export("kusion_plugin_decl")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a kusion plugin"), "{e}");
        // A real shared library without the symbol: the C library.
        for libc in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ] {
            if Path::new(libc).exists() {
                let v = Verified::open(Path::new(libc)).unwrap();
                v.require_export("malloc").unwrap();
                let e = v
                    .require_export("kusion_plugin_decl")
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("exports no"), "{e}");
                break;
            }
        }
    }

    #[test]
    fn signatures_bind_name_version_and_file() {
        let key = generate_key().unwrap();
        let public = public_key(&key).unwrap();
        let trusted: std::collections::BTreeMap<String, String> =
            [("acme".to_string(), public)].into();
        let sum = "ab".repeat(32);
        let mut m = manifest("lib.so");
        m.publisher = Some("acme".into());
        m.signature = Some(sign(&key, &m, &sum).unwrap());
        check_signature(&m, Path::new("plugin.toml"), &sum, &trusted, true).unwrap();
        let other = "cd".repeat(32);
        let e = check_signature(&m, Path::new("plugin.toml"), &other, &trusted, true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not match"), "{e}");
        m.version = "1.0.1".into();
        assert!(check_signature(&m, Path::new("plugin.toml"), &sum, &trusted, true).is_err());
        m.publisher = Some("mallory".into());
        let e = check_signature(&m, Path::new("plugin.toml"), &sum, &trusted, true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not among the trusted keys"), "{e}");
        let unsigned = manifest("lib.so");
        check_signature(&unsigned, Path::new("p"), &sum, &trusted, false).unwrap();
        assert!(check_signature(&unsigned, Path::new("p"), &sum, &trusted, true).is_err());
    }
}
