//! `LocalFile`: an example third-party runtime plugin built only against `kusion-sdk`.
//!
//! It serves resources of type `LocalFile` whose attributes are `{path, content}` and keeps each
//! as a file under a root directory set by `configure({"root": "/some/dir"})`. `apply` writes,
//! `read` reads, `delete` removes, `import` adopts an existing file, and `watch` reports `Ready`
//! once the file holds the planned content.

use std::path::{Component, Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, Capabilities, DeleteRequest, Health, ImportRequest, ObjectStatus,
    ReadRequest, ReadResponse, Runtime, RuntimeInfo, Watch, WatchEvent, WatchPoll, WatchRequest,
};
use kusion_sdk::{ABI_VERSION, ErrorKind, Map, PluginError, PluginResult, Resource, Value};

pub const RESOURCE_TYPE: &str = "LocalFile";

#[derive(Default)]
pub struct LocalFile {
    root: RwLock<Option<PathBuf>>,
}

impl LocalFile {
    pub fn new() -> Self {
        LocalFile::default()
    }

    fn root(&self) -> PluginResult<PathBuf> {
        self.root
            .read()
            .map_err(|_| PluginError::internal("configuration lock poisoned"))?
            .clone()
            .ok_or_else(|| {
                PluginError::invalid("LocalFile is not configured: set `root` in its configuration")
            })
    }

    /// The file behind a resource: `attributes.path`, relative and inside the root.
    fn file_of(&self, resource: &Resource) -> PluginResult<PathBuf> {
        let rel = resource
            .attributes
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                PluginError::invalid(format!(
                    "{}: attribute `path` (a string) is required",
                    resource.id
                ))
            })?;
        Ok(self.root()?.join(checked_relative(&resource.id, rel)?))
    }
}

/// Refuse paths that could leave the root (`..`, absolute paths).
fn checked_relative<'a>(id: &str, rel: &'a str) -> PluginResult<&'a Path> {
    let path = Path::new(rel);
    if rel.is_empty()
        || path
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(PluginError::invalid(format!(
            "{id}: `path` must be a relative path without `..`, got `{rel}`"
        )));
    }
    Ok(path)
}

fn io_error(id: &str, action: &str, path: &Path, e: std::io::Error) -> PluginError {
    let kind = match e.kind() {
        std::io::ErrorKind::PermissionDenied => ErrorKind::Rejected,
        std::io::ErrorKind::InvalidInput => ErrorKind::InvalidInput,
        _ => ErrorKind::Unavailable,
    };
    PluginError::new(
        kind,
        format!("{id}: cannot {action} {}: {e}", path.display()),
    )
}

fn content_of(resource: &Resource) -> PluginResult<&str> {
    match resource.attributes.get("content") {
        None => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(PluginError::invalid(format!(
            "{}: attribute `content` must be a string",
            resource.id
        ))),
    }
}

/// Read the file behind `planned` and describe it as a resource, or `None` if it is absent.
fn read_live(file: &Path, like: &Resource) -> PluginResult<Option<Resource>> {
    match std::fs::read_to_string(file) {
        Ok(content) => {
            let mut attributes = Map::new();
            attributes.insert(
                "path".into(),
                like.attributes.get("path").cloned().unwrap_or(Value::Null),
            );
            attributes.insert("content".into(), Value::String(content));
            let mut live = Resource::new(like.id.clone(), like.resource_type.clone(), attributes);
            live.depends_on = like.depends_on.clone();
            live.extensions = like.extensions.clone();
            Ok(Some(live))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(&like.id, "read", file, e)),
    }
}

impl Runtime for LocalFile {
    fn describe(&self) -> RuntimeInfo {
        RuntimeInfo {
            name: "localfile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: ABI_VERSION,
            resource_types: vec![RESOURCE_TYPE.into()],
            capabilities: Capabilities {
                dry_run: true,
                watch: true,
                import: true,
                sensitive_fields: false,
            },
        }
    }

    fn configure(&self, config: &Value) -> PluginResult<()> {
        let root = config.get("root").and_then(Value::as_str).ok_or_else(|| {
            PluginError::invalid("LocalFile configuration needs `root` (a directory path)")
        })?;
        let root = PathBuf::from(root);
        std::fs::create_dir_all(&root).map_err(|e| io_error("configure", "create", &root, e))?;
        *self
            .root
            .write()
            .map_err(|_| PluginError::internal("configuration lock poisoned"))? = Some(root);
        Ok(())
    }

    fn apply(&self, request: &ApplyRequest) -> PluginResult<ApplyResponse> {
        let planned = &request.planned;
        let file = self.file_of(planned)?;
        let content = content_of(planned)?;
        if !request.dry_run {
            // A path change moves the resource: drop the old file so nothing is left behind.
            if let Some(prior) = &request.prior {
                let old = self.file_of(prior)?;
                if old != file {
                    remove_if_present(&prior.id, &old)?;
                }
            }
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| io_error(&planned.id, "create", dir, e))?;
            }
            std::fs::write(&file, content).map_err(|e| io_error(&planned.id, "write", &file, e))?;
        }
        Ok(ApplyResponse {
            resource: planned.clone(),
            private: None,
            sensitive_paths: Vec::new(),
            unknown_paths: Vec::new(),
            requires_replace: Vec::new(),
        })
    }

    fn read(&self, request: &ReadRequest) -> PluginResult<ReadResponse> {
        let Some(like) = request.prior.as_ref().or(request.planned.as_ref()) else {
            return Err(PluginError::invalid(
                "read needs a prior or a planned resource",
            ));
        };
        let file = self.file_of(like)?;
        Ok(ReadResponse {
            resource: read_live(&file, like)?,
            private: None,
            sensitive_paths: Vec::new(),
        })
    }

    fn import(&self, request: &ImportRequest) -> PluginResult<ReadResponse> {
        let mut like = request.planned.clone();
        if let Some(id) = &request.import_id {
            like.attributes
                .insert("path".into(), Value::String(id.clone()));
        }
        let file = self.file_of(&like)?;
        Ok(ReadResponse {
            resource: read_live(&file, &like)?,
            private: None,
            sensitive_paths: Vec::new(),
        })
    }

    fn delete(&self, request: &DeleteRequest) -> PluginResult<()> {
        remove_if_present(&request.resource.id, &self.file_of(&request.resource)?)
    }

    fn watch(&self, request: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
        let file = self.file_of(&request.resource)?;
        let expected = content_of(&request.resource)?.to_string();
        Ok(Box::new(FileWatch {
            file,
            expected,
            name: request.resource.id.clone(),
            done: false,
            last: None,
        }))
    }
}

fn remove_if_present(id: &str, file: &Path) -> PluginResult<()> {
    match std::fs::remove_file(file) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error(id, "remove", file, e)),
    }
}

/// Polls the file until it holds the expected content; reports each change of state, then
/// `Ready` once, then closes.
struct FileWatch {
    file: PathBuf,
    expected: String,
    name: String,
    done: bool,
    last: Option<WatchEvent>,
}

impl FileWatch {
    fn event(&self) -> WatchEvent {
        let (health, detail) = match std::fs::read_to_string(&self.file) {
            Ok(c) if c == self.expected => (Health::Ready, String::new()),
            Ok(_) => (
                Health::Progressing,
                "content differs from the planned content".to_string(),
            ),
            Err(e) => (Health::Progressing, format!("{}: {e}", self.file.display())),
        };
        WatchEvent {
            health,
            detail: detail.clone(),
            objects: vec![ObjectStatus {
                kind: "File".into(),
                name: self.name.clone(),
                health,
                detail,
            }],
            object: None,
        }
    }
}

impl Watch for FileWatch {
    fn poll(&mut self, timeout: Duration) -> PluginResult<WatchPoll> {
        if self.done {
            return Ok(WatchPoll::Closed);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let event = self.event();
            if event.health == Health::Ready {
                self.done = true;
                return Ok(WatchPoll::Event(event));
            }
            if self.last.as_ref() != Some(&event) {
                self.last = Some(event.clone());
                return Ok(WatchPoll::Event(event));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(WatchPoll::Pending);
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
        }
    }
}

kusion_sdk::export_runtime!(LocalFile::new);
