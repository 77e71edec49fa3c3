//! `kusionctl init`: scaffold a project and its stacks from a template built into the binary.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use kusion_kcl::find_mod_root;

use super::{PROJECT_FILE, STACK_FILE};

/// A template: files of the project folder (`base/...`, `project.yaml`) and of each stack
/// (`stack/...` in the template, one copy per stack). `{{project}}` and `{{stack}}` are replaced.
struct Template {
    name: &'static str,
    about: &'static str,
    project_files: &'static [(&'static str, &'static str)],
    stack_files: &'static [(&'static str, &'static str)],
}

const TEMPLATES: &[Template] = &[Template {
    name: "app",
    about: "a web application: Namespace, ConfigMap, Deployment and Service from one `App` schema",
    project_files: &[
        (PROJECT_FILE, include_str!("templates/app/project.yaml")),
        ("base/base.k", include_str!("templates/app/base/base.k")),
        ("base/render.k", include_str!("templates/app/base/render.k")),
    ],
    stack_files: &[
        (STACK_FILE, include_str!("templates/app/stack/stack.yaml")),
        ("kcl.yaml", include_str!("templates/app/stack/kcl.yaml")),
        ("main.k", include_str!("templates/app/stack/main.k")),
    ],
}];

pub const DEFAULT_TEMPLATE: &str = "app";

/// The built-in templates: (name, description).
pub fn templates() -> impl Iterator<Item = (&'static str, &'static str)> {
    TEMPLATES.iter().map(|t| (t.name, t.about))
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

/// Create `dir/PROJECT` with `stacks` (default `dev`). Outside a Konfig root the project becomes
/// its own root (`PROJECT/kcl.mod`): everything `init` writes stays under `PROJECT/`. Returns the
/// files written.
pub fn init(dir: &Path, template: &str, project: &str, stacks: &[String]) -> Result<Vec<PathBuf>> {
    let Some(t) = TEMPLATES.iter().find(|t| t.name == template) else {
        let known: Vec<&str> = TEMPLATES.iter().map(|t| t.name).collect();
        bail!(
            "unknown template {template:?} (built-in templates: {})",
            known.join(", ")
        );
    };
    let stacks: Vec<String> = if stacks.is_empty() {
        vec!["dev".to_string()]
    } else {
        stacks.to_vec()
    };
    for n in std::iter::once(project).chain(stacks.iter().map(String::as_str)) {
        if !valid_name(n) {
            bail!(
                "{n:?} is not a valid project or stack name (lowercase letters, digits and '-', at most 63; it becomes part of Kubernetes names)"
            );
        }
    }
    let project_dir = dir.join(project);
    if project_dir.join(PROJECT_FILE).exists() {
        bail!("{} already holds a project", project_dir.display());
    }
    for s in &stacks {
        if project_dir.join(s).exists() {
            bail!("{} already exists", project_dir.join(s).display());
        }
    }
    let mut written = Vec::new();
    let mut write = |path: PathBuf, text: String| -> Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        written.push(path);
        Ok(())
    };
    if find_mod_root(dir).is_none() {
        write(
            project_dir.join("kcl.mod"),
            "[package]\nname = \"konfig\"\nversion = \"0.1.0\"\n".to_string(),
        )?;
    }
    for (rel, text) in t.project_files {
        write(project_dir.join(rel), text.replace("{{project}}", project))?;
    }
    for s in &stacks {
        for (rel, text) in t.stack_files {
            write(
                project_dir.join(s).join(rel),
                text.replace("{{project}}", project).replace("{{stack}}", s),
            )?;
        }
    }
    Ok(written)
}
