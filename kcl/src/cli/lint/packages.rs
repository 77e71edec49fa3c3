//! Which packages `kcl lint` lints: a folder is one, `DIR/...` every folder below with `.k`
//! files; a folder with a `kcl.yaml` is the files it lists, and a folder whose files some
//! `kcl.yaml` lists all is linted there and not alone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::pkg::resolve::normalize;

/// The packages to lint: a folder and its files (in name order), folders in name order.
pub(super) fn packages(
    cwd: &Path,
    specs: &[String],
) -> Result<Vec<(PathBuf, Vec<PathBuf>)>, String> {
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut loose: Vec<PathBuf> = Vec::new();
    for s in specs {
        if let Some(base) = s.strip_suffix("...") {
            let base = base.trim_end_matches('/');
            let root = cwd.join(if base.is_empty() { "." } else { base });
            walk(&normalize(&root), &mut dirs);
        } else {
            let p = normalize(&cwd.join(s));
            if p.is_dir() {
                dirs.insert(p);
            } else if p.is_file() {
                loose.push(p);
            } else {
                return Err(format!("cannot find '{s}'"));
            }
        }
    }
    // files listed by a folder's kcl.yaml are linted with that folder
    let mut claimed: BTreeSet<PathBuf> = BTreeSet::new();
    let mut listed: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for d in &dirs {
        if let Some(files) = settings_files(d) {
            for f in &files {
                if let Ok(c) = std::fs::canonicalize(f) {
                    claimed.insert(c);
                }
            }
            listed.push((d.clone(), files));
        }
    }
    let mut out: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for d in &dirs {
        if let Some((_, files)) = listed.iter().find(|(x, _)| x == d) {
            out.push((d.clone(), files.clone()));
            continue;
        }
        let files = k_files(d);
        if files.is_empty() {
            continue;
        }
        let all_claimed = files.iter().all(|f| {
            std::fs::canonicalize(f).is_ok_and(|c| claimed.contains(&c))
                || f.to_string_lossy().ends_with("_test.k")
        });
        if all_claimed && !claimed.is_empty() && files.iter().any(|f| !is_test(f)) {
            continue;
        }
        out.push((d.clone(), files));
    }
    for f in loose {
        let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
        match out.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, fs)) if !fs.contains(&f) => fs.push(f),
            Some(_) => {}
            None => out.push((dir, vec![f])),
        }
    }
    if out.is_empty() {
        return Err(format!("no KCL files found in {}", specs.join(" ")));
    }
    Ok(out)
}

fn is_test(p: &Path) -> bool {
    p.to_string_lossy().ends_with("_test.k")
}

fn walk(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut has_k = false;
    let mut subdirs = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !name.starts_with('.') {
                subdirs.push(p);
            }
        } else if name.ends_with(".k") {
            has_k = true;
        }
    }
    if has_k || dir.join("kcl.yaml").is_file() {
        out.insert(dir.to_path_buf());
    }
    subdirs.sort();
    for s in subdirs {
        walk(&s, out);
    }
}

/// A folder's `.k` files: the package's, then its tests, each in name order.
fn k_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "k"))
                .collect()
        })
        .unwrap_or_default();
    files.sort_by_key(|p| (is_test(p), p.clone()));
    files
}

/// The files a folder's `kcl.yaml` lists (`kcl_cli_configs.files`), as `kcl run` reads them.
fn settings_files(dir: &Path) -> Option<Vec<PathBuf>> {
    let text = std::fs::read_to_string(dir.join("kcl.yaml")).ok()?;
    let y: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).ok()?;
    let c = y.get("kcl_cli_configs")?;
    let mut out = Vec::new();
    for key in ["files", "file"] {
        if let Some(serde_yaml_ng::Value::Sequence(fs)) = c.get(key) {
            for f in fs.iter().filter_map(|f| f.as_str()) {
                let p = PathBuf::from(f);
                out.push(if p.is_absolute() || f.contains("KCL_MOD}") {
                    p
                } else {
                    normalize(&dir.join(p))
                });
            }
        }
    }
    (!out.is_empty()).then_some(out)
}
