//! This checkout's built plugins, staged where a `kusionctl` built here looks for them.
//!
//! `kusionctl` finds installed plugins in `<exe dir>/../lib/kusion/plugins` (an installation's
//! `<prefix>/bin/kusionctl` → `<prefix>/lib/kusion/plugins`); for a build at
//! `<target>/<profile>/kusionctl` that is `<target>/lib/kusion/plugins`. The plugin host knows
//! nothing of this source tree, so [`stage`] puts every in-repo plugin that is built there, laid
//! out as `scripts/install.sh` lays out an installation: `<name>/{plugin.toml, <file>}`, the
//! manifest carrying the file's `sha256`. It is what `scripts/stage-plugins.sh` runs after a
//! build and what [`crate::cli::kusionctl`] runs before a test drives the built binary.
//!
//! In-repo plugins are the `plugin.toml` files one folder below `runtimes/`, `plugins/`,
//! `examples/` and `tests/`; a native file is looked up in `<target>/{debug,release}`, a WASM
//! one in `<target>/wasm32-wasip2/{debug,release}`, and the newer build wins (a fresh debug build
//! is not shadowed by a stale release). A plugin not built is removed from the staged folder, so
//! it never holds a stale copy that looks current.

use std::path::{Path, PathBuf};

use kusion_kernel::plugin::manifest::{self, Format, Manifest};

/// The folders of this checkout holding in-repo plugins, one crate below each.
const GROUPS: [&str; 4] = ["runtimes", "plugins", "examples", "tests"];

/// The plugin folder of the `kusionctl` binaries built into `target` (`<target>/<profile>/`).
pub fn staged_dir(target: &Path) -> PathBuf {
    target.join("lib").join("kusion").join("plugins")
}

/// What [`stage`] did with one in-repo plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Copied in (new, or rebuilt since it was last staged).
    Staged(PathBuf),
    /// Already staged from this build.
    Current(PathBuf),
    /// Not built: nothing staged (and a stale copy removed).
    NotBuilt,
}

/// Stage every built in-repo plugin of `checkout` from the cargo target folder `target` into
/// [`staged_dir`]. Returns each plugin's name with what was done; an error names the file.
pub fn stage(checkout: &Path, target: &Path) -> Result<Vec<(String, Outcome)>, String> {
    let into = staged_dir(target);
    create_private_dir(&into)?;
    let mut done = Vec::new();
    for manifest_path in in_repo_manifests(checkout) {
        let manifest = Manifest::load(&manifest_path).map_err(|e| e.to_string())?;
        let dest_dir = into.join(&manifest.name);
        let outcome = match newest_build(target, &manifest) {
            None => {
                if dest_dir.exists() {
                    std::fs::remove_dir_all(&dest_dir)
                        .map_err(|e| format!("{}: {e}", dest_dir.display()))?;
                }
                Outcome::NotBuilt
            }
            Some(built) => {
                let dest = dest_dir.join(&manifest.file);
                if is_current(&dest_dir, &dest, &built, &manifest_path) {
                    Outcome::Current(dest)
                } else {
                    create_private_dir(&dest_dir)?;
                    manifest::install(&into, &manifest, &built).map_err(|e| e.to_string())?;
                    Outcome::Staged(dest)
                }
            }
        };
        done.push((manifest.name, outcome));
    }
    // Folders of plugins this checkout no longer has.
    let known: Vec<&str> = done.iter().map(|(name, _)| name.as_str()).collect();
    let entries = std::fs::read_dir(&into).map_err(|e| format!("{}: {e}", into.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !known.iter().any(|k| name == **k) {
            let path = entry.path();
            std::fs::remove_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(done)
}

/// `<checkout>/<group>/<crate>/plugin.toml` for every group, sorted.
fn in_repo_manifests(checkout: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = GROUPS
        .iter()
        .filter_map(|group| std::fs::read_dir(checkout.join(group)).ok())
        .flat_map(|entries| {
            entries
                .flatten()
                .map(|e| e.path().join(manifest::MANIFEST_FILE))
        })
        .filter(|m| m.is_file())
        .collect();
    found.sort();
    found
}

/// The newest build of the manifest's file in `target`.
fn newest_build(target: &Path, manifest: &Manifest) -> Option<PathBuf> {
    let base = match manifest.format() {
        Format::Native => target.to_path_buf(),
        Format::Wasm => target.join("wasm32-wasip2"),
    };
    ["debug", "release"]
        .iter()
        .map(|profile| base.join(profile).join(&manifest.file))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
}

/// Whether `dest_dir` was staged from the build at `built` and the manifest at
/// `manifest_path` as they are now: a staged copy is written after its sources, so it is newer,
/// and the library has the build's length.
fn is_current(dest_dir: &Path, dest: &Path, built: &Path, manifest_path: &Path) -> bool {
    let newer = |staged: &Path, source: &Path| -> Option<bool> {
        let (staged, source) = (
            std::fs::metadata(staged).ok()?,
            std::fs::metadata(source).ok()?,
        );
        Some(staged.modified().ok()? >= source.modified().ok()?)
    };
    let same_length = match (std::fs::metadata(dest), std::fs::metadata(built)) {
        (Ok(staged), Ok(source)) => staged.len() == source.len(),
        _ => false,
    };
    same_length
        && newer(dest, built) == Some(true)
        && newer(&dest_dir.join(manifest::MANIFEST_FILE), manifest_path) == Some(true)
}

/// A folder the plugin host accepts: writable by its owner only, whatever the umask.
fn create_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", dir.display()))
}
