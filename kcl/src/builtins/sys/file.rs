//! The `file` module: reading, writing and globbing files under the host's access rules, with
//! upstream's paths (`${KCL_MOD}`) and messages.

use super::{A, K, R, flag};
use crate::builtins::text_arg;
use crate::value::{Host, RtError, Value};

/// `file`.
pub(super) fn file(name: &str) -> Option<Value> {
    natives!(name, {
        "read" => |h: &mut dyn Host, a: A, k: K| -> R {
            let arg = text_arg(a, k, 0, "filepath", "read")?;
            let p = resolve(h, &arg);
            h.access().check_read("read", &p)?;
            std::fs::read_to_string(&p).map(Value::from).map_err(|e| RtError::eval(format!("failed to access the file '{}': {e}", shown(h, &arg))))
        },
        "glob" => |h: &mut dyn Host, a: A, k: K| -> R {
            let pat = text_arg(a, k, 0, "pattern", "glob")?;
            // the empty pattern matches nothing (it is no path)
            let found = if pat.is_empty() { Vec::new() } else { glob(h, &pat)? };
            // Only what the program may read is listed.
            let access = h.access();
            let found: Vec<Value> = found
                .into_iter()
                .filter(|p| access.check_read("glob", std::path::Path::new(p)).is_ok())
                .map(Value::from)
                .collect();
            Ok(Value::from(found))
        },
        "modpath" => |h: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(h.mod_root().display().to_string())) },
        "workdir" => |h: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(h.exec_workdir())) },
        "current" => |h: &mut dyn Host, _a: A, _k: K| -> R { Ok(Value::from(h.current_file())) },
        "exists" => |h: &mut dyn Host, a: A, k: K| -> R {
            let p = resolve(h, &text_arg(a, k, 0, "filepath", "exists")?);
            h.access().check_read("exists", &p)?;
            Ok(Value::Bool(p.exists()))
        },
        "abs" => |h: &mut dyn Host, a: A, k: K| -> R {
            let arg = text_arg(a, k, 0, "filepath", "abs")?;
            let p = resolve(h, &arg);
            h.access().check_read("abs", &p)?;
            // upstream's is the canonical path: a path that does not exist has none
            std::fs::canonicalize(&p)
                .map(|c| Value::from(c.display().to_string()))
                .map_err(|_| RtError::eval(format!("Could not get the absolute path of {arg}")))
        },
        "mkdir" => |h: &mut dyn Host, a: A, k: K| -> R {
            let p = resolve(h, &text_arg(a, k, 0, "directory", "mkdir")?);
            h.access().check_write("mkdir", &p)?;
            let exist_ok = flag(a, k, 1, "exists");
            match std::fs::create_dir_all(&p) {
                Ok(()) => Ok(Value::None),
                Err(e) if exist_ok => { let _ = e; Ok(Value::None) },
                Err(e) => Err(RtError::eval(format!("Failed to create directory '{}': {e}", shown(h, &text_arg(a, k, 0, "directory", "mkdir")?)))),
            }
        },
        "delete" => |h: &mut dyn Host, a: A, k: K| -> R {
            let arg = text_arg(a, k, 0, "filepath", "delete")?;
            let p = resolve(h, &arg);
            h.access().check_write("delete", &p)?;
            // a file only: upstream's refuses a directory ("Is a directory")
            std::fs::remove_file(&p).map(|_| Value::None).map_err(|e| RtError::eval(format!("failed to delete '{}': {e}", shown(h, &arg))))
        },
        "cp" => |h: &mut dyn Host, a: A, k: K| -> R {
            let (sa, da) = (text_arg(a, k, 0, "src", "cp")?, text_arg(a, k, 1, "dest", "cp")?);
            let (s, d) = (resolve(h, &sa), resolve(h, &da));
            h.access().check_read("cp", &s)?;
            h.access().check_write("cp", &d)?;
            let r = if s.is_dir() { copy_dir(&s, &d) } else { std::fs::copy(&s, &d).map(|_| ()) };
            r.map(|_| Value::None).map_err(|e| RtError::eval(format!("Failed to copy from '{}' to '{}': {e}", shown(h, &sa), shown(h, &da))))
        },
        "mv" => |h: &mut dyn Host, a: A, k: K| -> R {
            let (sa, da) = (text_arg(a, k, 0, "src", "mv")?, text_arg(a, k, 1, "dest", "mv")?);
            let (s, d) = (resolve(h, &sa), resolve(h, &da));
            h.access().check_write("mv", &s)?;
            h.access().check_write("mv", &d)?;
            std::fs::rename(&s, &d).map(|_| Value::None).map_err(|e| RtError::eval(format!("Failed to move '{}' to '{}': {e}", shown(h, &sa), shown(h, &da))))
        },
        "size" => |h: &mut dyn Host, a: A, k: K| -> R {
            let arg = text_arg(a, k, 0, "filepath", "size")?;
            let p = resolve(h, &arg);
            h.access().check_read("size", &p)?;
            std::fs::metadata(&p).map(|m| Value::Int(m.len() as i64)).map_err(|e| RtError::eval(format!("failed to get size of '{}': {e}", shown(h, &arg))))
        },
        "write" => |h: &mut dyn Host, a: A, k: K| -> R {
            let p = text_arg(a, k, 0, "filepath", "write")?;
            let c = text_arg(a, k, 1, "content", "write")?;
            write_file(h, &p, &c)
        },
        "append" => |h: &mut dyn Host, a: A, k: K| -> R {
            let p = text_arg(a, k, 0, "filepath", "append")?;
            let c = text_arg(a, k, 1, "content", "append")?;
            let path = resolve(h, &p);
            h.access().check_write("append", &path)?;
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .map_err(|e| RtError::eval(format!("Failed to open or create file '{}': {e}", shown(h, &p))))
                .and_then(|mut f| {
                    std::io::Write::write_all(&mut f, c.as_bytes())
                        .map_err(|e| RtError::eval(format!("Failed to append to file '{}': {e}", shown(h, &p))))
                })
                .map(|_| Value::None)
        },
        "read_env" => |h: &mut dyn Host, a: A, k: K| -> R {
            let n = text_arg(a, k, 0, "key", "read_env")?;
            h.access().check_env(&n)?;
            // an unset variable is Undefined upstream (an attribute bound to it is left out)
            Ok(std::env::var(&*n).map(Value::from).unwrap_or(Value::Undefined))
        },
    })
}

/// `src`'s files and folders copied into `dest` (made, with its parents, when missing; what
/// it holds already stays unless a copy replaces it), as upstream's `cp` of a directory.
fn copy_dir(src: &std::path::Path, dest: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dest)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let to = dest.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else {
            std::fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}

pub(super) fn resolve(h: &mut dyn Host, p: &str) -> std::path::PathBuf {
    let p = p.replace("${KCL_MOD}", &h.mod_root().display().to_string());
    let pb = std::path::PathBuf::from(&p);
    // the empty path names no file (upstream's calls fail on it), not the working directory
    if pb.is_absolute() || p.is_empty() {
        pb
    } else {
        h.workdir().join(pb)
    }
}

/// A path argument as upstream's messages show it: as written (`${KCL_MOD}` expanded), relative
/// paths not joined to the working directory, as the `kcl` command line prints them.
fn shown(h: &mut dyn Host, p: &str) -> String {
    p.replace("${KCL_MOD}", &h.mod_root().display().to_string())
}

pub(super) fn write_file(h: &mut dyn Host, p: &str, content: &str) -> R {
    let path = resolve(h, p);
    h.access().check_write("write", &path)?;
    std::fs::write(&path, content)
        .map(|_| Value::None)
        .map_err(|e| RtError::eval(format!("Failed to create file '{}': {e}", shown(h, p))))
}

fn glob(h: &mut dyn Host, pat: &str) -> Result<Vec<String>, RtError> {
    // upstream's glob is the `glob` crate's over the working folder; the pattern is checked
    // first, so its syntax errors read as upstream's
    let checked = glob::Pattern::new(pat)
        .map_err(|e| RtError::eval(format!("Failed to read glob pattern: {e}")))?;
    let base = h.workdir();
    let abs = pat.starts_with('/');
    let full = if abs {
        checked.as_str().to_string()
    } else {
        format!(
            "{}/{}",
            glob::Pattern::escape(&base.display().to_string()),
            checked.as_str()
        )
    };
    let paths = glob::glob(&full)
        .map_err(|e| RtError::eval(format!("Failed to read glob pattern: {e}")))?;
    let mut found = Vec::new();
    for p in paths {
        let p = p.map_err(|e| {
            RtError::eval(format!("failed to access the file matching '{pat}': {e}"))
        })?;
        if abs {
            found.push(p.display().to_string());
            continue;
        }
        let Ok(rel) = p.strip_prefix(&base) else {
            found.push(p.display().to_string());
            continue;
        };
        // relative to the working folder, as the crate names them there: `.` and `..` of the
        // folder itself as `./.` and `./..`; a path's trailing `.` (dropped by Path) kept
        let rel = rel.display().to_string();
        let dot = p.as_os_str().to_string_lossy().ends_with("/.");
        found.push(match (rel.as_str(), dot) {
            ("", _) => "./.".to_string(),
            ("..", _) => "./..".to_string(),
            (_, true) => format!("{rel}/."),
            _ => rel,
        });
    }
    Ok(found)
}
