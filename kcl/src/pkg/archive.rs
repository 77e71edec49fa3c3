//! Package tarballs, the one layer of a published package: upstream kpm tars the package root
//! (`<name>_<version>.tar`, plain tar) leaving out `.git` and `.tar` paths, and unpacks files and
//! folders only. A gzip layer (`.tgz`) is also read.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::PkgError;

/// The files of the package in `root`, sorted, as relative paths: everything but `.git` and
/// `.tar` paths, the `exclude` patterns, and (when `include` is given) what no include
/// pattern covers. A pattern covers a path when it matches the path or a folder above it
/// (`*` does not cross `/`, as Go's `filepath.Match`).
pub fn package_files(
    root: &Path,
    include: &[String],
    exclude: &[String],
) -> Result<Vec<PathBuf>, PkgError> {
    let inc = patterns(include)?;
    let exc = patterns(exclude)?;
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.retain(|rel| {
        let s = rel.to_string_lossy();
        if s.contains(".git") || s.contains(".tar") {
            return false;
        }
        let covered = |pats: &[glob_lite::Pattern]| {
            rel.ancestors()
                .filter(|a| !a.as_os_str().is_empty())
                .any(|a| pats.iter().any(|p| p.matches(&a.to_string_lossy())))
        };
        !covered(&exc) && (inc.is_empty() || covered(&inc) || rel == Path::new("kcl.mod"))
    });
    Ok(out)
}

fn patterns(list: &[String]) -> Result<Vec<glob_lite::Pattern>, PkgError> {
    list.iter()
        .map(|p| {
            glob_lite::Pattern::new(p.trim_start_matches("./"))
                .ok_or_else(|| PkgError::Invalid(format!("invalid pattern '{p}' in kcl.mod")))
        })
        .collect()
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), PkgError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| PkgError::io(dir, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| PkgError::io(dir, e))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let ft = e.file_type().map_err(|err| PkgError::io(&p, err))?;
        let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
        if ft.is_dir() {
            walk(root, &p, out)?;
        } else if ft.is_file() {
            out.push(rel);
        } else if ft.is_symlink() {
            let s = rel.to_string_lossy();
            if s.contains(".git") || s.contains(".tar") {
                continue;
            }
            return Err(PkgError::Invalid(format!(
                "{}: symbolic links cannot be published in a package (upstream's tools cannot unpack them)",
                p.display()
            )));
        }
    }
    Ok(())
}

/// A plain tar of `files` (relative to `root`), reproducible: entries in order, folders before
/// their files, fixed times and owners, so the same content always has the same digest.
pub fn pack(root: &Path, files: &[PathBuf]) -> Result<Vec<u8>, PkgError> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dirs = std::collections::BTreeSet::new();
    for rel in files {
        for a in rel
            .ancestors()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if a.as_os_str().is_empty() || !dirs.insert(a.to_path_buf()) {
                continue;
            }
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(0o755);
            h.set_size(0);
            h.set_mtime(0);
            h.set_path(a).map_err(|e| PkgError::io(a, e))?;
            h.set_cksum();
            b.append(&h, std::io::empty())
                .map_err(|e| PkgError::io(a, e))?;
        }
        let full = root.join(rel);
        let data = std::fs::read(&full).map_err(|e| PkgError::io(&full, e))?;
        let exec = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(&full)
                .map(|m| m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        };
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(if exec { 0o755 } else { 0o644 });
        h.set_size(data.len() as u64);
        h.set_mtime(0);
        // long names go in a GNU extension the tar crate writes for us
        b.append_data(&mut h, rel, &data[..])
            .map_err(|e| PkgError::io(&full, e))?;
    }
    b.into_inner().map_err(|e| PkgError::io(root, e))
}

/// Unpacks a package tarball (plain or gzip) into `dest`. Only files and folders are taken,
/// and no entry may leave `dest`.
pub fn unpack(data: &[u8], dest: &Path, what: &str) -> Result<(), PkgError> {
    let reader: Box<dyn Read + '_> = if data.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(data))
    } else {
        Box::new(data)
    };
    std::fs::create_dir_all(dest).map_err(|e| PkgError::io(dest, e))?;
    let bad = |m: String| PkgError::Invalid(format!("package archive of {what}: {m}"));
    let mut ar = tar::Archive::new(reader);
    let entries = ar.entries().map_err(|e| bad(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let ty = entry.header().entry_type();
        let name = entry
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        match ty {
            tar::EntryType::Regular | tar::EntryType::Directory | tar::EntryType::Continuous => {
                let inside = entry
                    .unpack_in(dest)
                    .map_err(|e| bad(format!("{name}: {e}")))?;
                if !inside {
                    return Err(bad(format!("entry '{name}' points outside the package")));
                }
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {}
            other => {
                return Err(bad(format!(
                    "entry '{name}' is a {other:?}; a package holds only files and folders"
                )));
            }
        }
    }
    Ok(())
}

/// Go's `filepath.Match` patterns (`*`, `?`, `[...]`, `\` escapes) on `/`-separated paths.
mod glob_lite {
    pub struct Pattern(Vec<Tok>);

    enum Tok {
        Lit(char),
        Any,
        Star,
        Class(Vec<(char, char)>, bool),
    }

    impl Pattern {
        pub fn new(p: &str) -> Option<Pattern> {
            let mut out = Vec::new();
            let mut it = p.chars().peekable();
            while let Some(c) = it.next() {
                out.push(match c {
                    '*' => Tok::Star,
                    '?' => Tok::Any,
                    '\\' => Tok::Lit(it.next()?),
                    '[' => {
                        let neg = it.next_if_eq(&'^').is_some();
                        let mut ranges = Vec::new();
                        loop {
                            let mut lo = it.next()?;
                            if lo == ']' && !ranges.is_empty() {
                                break;
                            }
                            if lo == '\\' {
                                lo = it.next()?;
                            }
                            let hi = if it.next_if_eq(&'-').is_some() {
                                match it.next()? {
                                    '\\' => it.next()?,
                                    h => h,
                                }
                            } else {
                                lo
                            };
                            ranges.push((lo, hi));
                        }
                        Tok::Class(ranges, neg)
                    }
                    c => Tok::Lit(c),
                });
            }
            Some(Pattern(out))
        }

        pub fn matches(&self, s: &str) -> bool {
            let chars: Vec<char> = s.chars().collect();
            fn go(p: &[Tok], s: &[char]) -> bool {
                match p.first() {
                    None => s.is_empty(),
                    Some(Tok::Star) => (0..=s.len())
                        .take_while(|&i| i == 0 || s[i - 1] != '/')
                        .any(|i| go(&p[1..], &s[i..])),
                    Some(t) => match s.first() {
                        Some(&c) if c != '/' || matches!(t, Tok::Lit('/')) => {
                            let ok = match t {
                                Tok::Lit(l) => *l == c,
                                Tok::Any => true,
                                Tok::Class(r, neg) => {
                                    r.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *neg
                                }
                                Tok::Star => unreachable!(),
                            };
                            ok && go(&p[1..], &s[1..])
                        }
                        _ => false,
                    },
                }
            }
            go(&self.0, &chars)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::Pattern;
        #[test]
        fn filepath_match_semantics() {
            let m = |p: &str, s: &str| Pattern::new(p).unwrap().matches(s);
            assert!(m("*.k", "a.k"));
            assert!(!m("*.k", "d/a.k"));
            assert!(m("d/*.k", "d/a.k"));
            assert!(m("tes?s", "tests"));
            assert!(m("[a-c]x", "bx"));
            assert!(!m("[^a-c]x", "bx"));
            assert!(m("docs", "docs"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_then_unpack_keeps_content_and_leaves_out_git() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("sub/deep")).unwrap();
        std::fs::create_dir_all(src.join(".git")).unwrap();
        std::fs::create_dir_all(src.join("tests")).unwrap();
        std::fs::write(src.join("kcl.mod"), "[package]\n").unwrap();
        std::fs::write(src.join("sub/deep/a.k"), "a = 1\n").unwrap();
        std::fs::write(src.join(".git/config"), "x").unwrap();
        std::fs::write(src.join("tests/t.k"), "t = 1\n").unwrap();
        std::fs::write(src.join("p_0.1.0.tar"), "old").unwrap();
        let files = package_files(&src, &[], &["tests".into()]).unwrap();
        assert_eq!(
            files,
            vec![PathBuf::from("kcl.mod"), PathBuf::from("sub/deep/a.k")]
        );
        let tar1 = pack(&src, &files).unwrap();
        assert_eq!(tar1, pack(&src, &files).unwrap(), "reproducible");
        let out = d.path().join("out");
        unpack(&tar1, &out, "p").unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("sub/deep/a.k")).unwrap(),
            "a = 1\n"
        );
        assert!(!out.join("tests").exists());
    }

    #[test]
    fn unpack_refuses_links_and_escapes() {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_cksum();
        b.append_link(&mut h, "evil", "/etc/passwd").unwrap();
        let data = b.into_inner().unwrap();
        let d = tempfile::tempdir().unwrap();
        let e = unpack(&data, d.path(), "p").unwrap_err().to_string();
        assert!(e.contains("only files and folders"), "{e}");
    }
}
