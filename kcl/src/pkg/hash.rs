//! Package checksums as upstream kpm computes them (`utils.HashDir`): SHA-256 over the contents
//! of every file in `filepath.Walk` order (depth first, names sorted bytewise), base64. The
//! `sum` of a `kcl.mod.lock` entry and the `org.kcllang.package.sum` manifest annotation are
//! this value, so a package hashes the same here and in upstream's tools.

use std::io::Read;
use std::path::Path;

use base64::Engine;
use sha2::{Digest, Sha256};

use super::PkgError;

/// Path fragments whose files are left out, as upstream: a `.git` folder differs between two
/// clones of one commit, and a `.tar` is the package's own archive beside it. Upstream tests the
/// whole path (so a cache under a folder named `x.git` would hash empty there); this tests the
/// path inside the package only.
const IGNORED: [&str; 2] = [".git", ".tar"];

/// The checksum of the package in `dir`.
pub fn hash_dir(dir: &Path) -> Result<String, PkgError> {
    let mut hasher = Sha256::new();
    walk(dir, dir, &mut hasher)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(hasher.finalize()))
}

fn walk(root: &Path, dir: &Path, hasher: &mut Sha256) -> Result<(), PkgError> {
    let io = |p: &Path, e: std::io::Error| PkgError::Io(p.display().to_string(), e);
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| io(dir, e))?;
    // Go sorts names as byte strings
    entries.sort_by(|a, b| {
        a.file_name()
            .as_encoded_bytes()
            .cmp(b.file_name().as_encoded_bytes())
    });
    for e in entries {
        let path = e.path();
        let ft = e.file_type().map_err(|err| io(&path, err))?;
        if ft.is_dir() {
            walk(root, &path, hasher)?;
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy();
        if IGNORED.iter().any(|i| rel.contains(i)) {
            continue;
        }
        let meta = std::fs::metadata(&path).map_err(|err| io(&path, err))?;
        if meta.is_dir() {
            // upstream's walk does not follow it and then fails reading it as a file
            return Err(PkgError::Invalid(format!(
                "{}: a symbolic link to a folder cannot be part of a package",
                path.display()
            )));
        }
        if !meta.is_file() {
            continue;
        }
        let mut f = std::fs::File::open(&path).map_err(|err| io(&path, err))?;
        let mut buf = [0u8; 64 * 1024];
        loop {
            let n = f.read(&mut buf).map_err(|err| io(&path, err))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_order_and_ignores_match_upstream() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("b")).unwrap();
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::write(p.join("b.k"), "2").unwrap();
        std::fs::write(p.join("b/x.k"), "1").unwrap();
        std::fs::write(p.join("a.k"), "0").unwrap();
        std::fs::write(p.join(".git/HEAD"), "ref").unwrap();
        std::fs::write(p.join("pkg_0.1.0.tar"), "tar").unwrap();
        std::fs::write(p.join(".gitignore"), "x").unwrap();
        // filepath.Walk: a.k, b/ (b/x.k), b.k  ("b" sorts before "b.k")
        let want = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(b"012"));
        assert_eq!(hash_dir(p).unwrap(), want);
    }

    #[test]
    fn empty_package_is_the_hash_of_nothing() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            hash_dir(d.path()).unwrap(),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
    }
}
