//! A fake cloud for tests: objects are JSON files in a directory. See README.md.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kusion_sdk::runtime::{
    ApplyRequest, ApplyResponse, Capabilities, DeleteRequest, Health, ImportRequest, ObjectStatus,
    ReadRequest, ReadResponse, Runtime, RuntimeInfo, Watch, WatchEvent, WatchPoll, WatchRequest,
};
use kusion_sdk::{ErrorKind, PluginError, PluginResult, Resource, Value};

pub const TYPE: &str = "Test";

pub struct TestRuntime {
    dir: RwLock<Option<PathBuf>>,
    delay_ms: AtomicU64,
}

impl Default for TestRuntime {
    fn default() -> Self {
        TestRuntime::new()
    }
}

impl TestRuntime {
    pub fn new() -> TestRuntime {
        let dir = std::env::var_os("KUSION_TEST_CLOUD").map(PathBuf::from);
        TestRuntime {
            dir: RwLock::new(dir),
            delay_ms: AtomicU64::new(0),
        }
    }

    pub fn with_dir(dir: impl Into<PathBuf>) -> TestRuntime {
        let rt = TestRuntime::new();
        *rt.dir.write().expect("fresh lock") = Some(dir.into());
        rt
    }

    fn dir(&self) -> PluginResult<PathBuf> {
        self.dir
            .read()
            .map_err(|_| PluginError::internal("poisoned"))?
            .clone()
            .ok_or_else(|| {
                PluginError::invalid(
                    "the test runtime has no cloud directory (config `dir` or KUSION_TEST_CLOUD)",
                )
            })
    }

    fn object_path(&self, id: &str) -> PluginResult<PathBuf> {
        let safe: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        // Keep names unique even when two IDs map to the same safe text.
        let hash = id.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
        Ok(self.dir()?.join(format!("{safe}-{hash:016x}.json")))
    }

    fn load(&self, id: &str) -> PluginResult<Option<Resource>> {
        let path = self.object_path(id)?;
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| PluginError::internal(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PluginError::new(ErrorKind::Unavailable, e.to_string())),
        }
    }

    fn store(&self, resource: &Resource) -> PluginResult<()> {
        let path = self.object_path(&resource.id)?;
        let dir = self.dir()?;
        fs::create_dir_all(&dir)
            .map_err(|e| PluginError::new(ErrorKind::Unavailable, e.to_string()))?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let bytes =
            serde_json::to_vec(resource).map_err(|e| PluginError::internal(e.to_string()))?;
        fs::write(&tmp, bytes)
            .and_then(|_| fs::rename(&tmp, &path))
            .map_err(|e| PluginError::new(ErrorKind::Unavailable, e.to_string()))
    }

    fn log_creation(&self, id: &str) -> PluginResult<()> {
        fs::create_dir_all(self.dir()?)
            .map_err(|e| PluginError::new(ErrorKind::Unavailable, e.to_string()))?;
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir()?.join("creations.log"))
            .map_err(|e| PluginError::new(ErrorKind::Unavailable, e.to_string()))?;
        // One write per line: `writeln!` issues the ID and the newline separately, and concurrent
        // creations would interleave them.
        f.write_all(format!("{id}\n").as_bytes())
            .map_err(|e| PluginError::new(ErrorKind::Unavailable, e.to_string()))
    }

    /// Every object currently in the cloud directory.
    pub fn objects(dir: &Path) -> Vec<Resource> {
        let Ok(entries) = fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect()
    }
}

fn sensitive(resource: &Resource) -> Vec<String> {
    if resource.attributes.contains_key("secret") {
        vec!["secret".to_string()]
    } else {
        Vec::new()
    }
}

fn new_uid(id: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let hash = id.bytes().fold(nanos as u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    format!("uid-{hash:016x}")
}

impl Runtime for TestRuntime {
    fn describe(&self) -> RuntimeInfo {
        RuntimeInfo {
            name: "test".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: kusion_sdk::ABI_VERSION,
            resource_types: vec![TYPE.into()],
            capabilities: Capabilities {
                dry_run: true,
                watch: true,
                import: true,
                sensitive_fields: true,
            },
        }
    }

    fn configure(&self, config: &Value) -> PluginResult<()> {
        if let Some(dir) = config.get("dir").and_then(Value::as_str) {
            *self
                .dir
                .write()
                .map_err(|_| PluginError::internal("poisoned"))? = Some(PathBuf::from(dir));
        }
        if let Some(ms) = config.get("delayMs").and_then(Value::as_u64) {
            self.delay_ms.store(ms, Ordering::SeqCst);
        }
        Ok(())
    }

    fn apply(&self, request: &ApplyRequest) -> PluginResult<ApplyResponse> {
        let planned = &request.planned;
        let existing = self.load(&planned.id)?;
        let mut result = planned.clone();
        result.depends_on.clear();
        result.extensions.clear();
        let uid = existing
            .as_ref()
            .and_then(|e| e.attributes.get("uid").cloned());
        let mut unknown = Vec::new();
        // `labelsAll` is computed from `labels`, as a provider computes `tags_all` from `tags`:
        // a dry-run knows it only while `labels` is unchanged.
        let labels_before = existing.as_ref().and_then(|e| e.attributes.get("labels"));
        let labels_all_before = existing
            .as_ref()
            .and_then(|e| e.attributes.get("labelsAll"));
        result.attributes.remove("labelsAll");
        if request.dry_run {
            match uid {
                Some(uid) => {
                    result.attributes.insert("uid".into(), uid);
                }
                None => unknown.push("uid".to_string()),
            }
            if let Some(labels) = planned.attributes.get("labels") {
                match labels_all_before {
                    Some(all) if labels_before == Some(labels) => {
                        result.attributes.insert("labelsAll".into(), all.clone());
                    }
                    _ => unknown.push("labelsAll".to_string()),
                }
            }
            return Ok(ApplyResponse {
                sensitive_paths: sensitive(planned),
                resource: result,
                private: None,
                unknown_paths: unknown,
                requires_replace: Vec::new(),
            });
        }
        let delay = planned
            .attributes
            .get("delayMs")
            .and_then(Value::as_u64)
            .unwrap_or(self.delay_ms.load(Ordering::SeqCst));
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        if planned.attributes.get("testFail").and_then(Value::as_bool) == Some(true) {
            return Err(PluginError::new(
                ErrorKind::Rejected,
                format!("{}: the test cloud refused it (testFail)", planned.id),
            ));
        }
        let uid = uid.unwrap_or_else(|| Value::String(new_uid(&planned.id)));
        result.attributes.insert("uid".into(), uid);
        if let Some(labels) = planned.attributes.get("labels") {
            result.attributes.insert("labelsAll".into(), labels.clone());
        }
        self.store(&result)?;
        // Logged after the object exists, so a crash in between can only lose a line, never
        // count a creation that did not happen.
        if existing.is_none() {
            self.log_creation(&planned.id)?;
        }
        Ok(ApplyResponse {
            sensitive_paths: sensitive(planned),
            resource: result,
            private: Some(format!("private-of-{}", planned.id)),
            unknown_paths: Vec::new(),
            requires_replace: Vec::new(),
        })
    }

    fn read(&self, request: &ReadRequest) -> PluginResult<ReadResponse> {
        let id = request
            .planned
            .as_ref()
            .or(request.prior.as_ref())
            .map(|r| r.id.clone())
            .ok_or_else(|| PluginError::invalid("read needs a planned or prior resource"))?;
        // An import ID names another object to adopt as this resource (as a Terraform import ID
        // names a bucket): `kusionctl import --live-id`.
        let adopt = request
            .planned
            .as_ref()
            .and_then(|p| p.extension_str("kusionstack.io/import-id"));
        let mut resource = self.load(adopt.unwrap_or(&id))?;
        if let Some(r) = resource.as_mut() {
            r.id = id.clone();
        }
        Ok(ReadResponse {
            sensitive_paths: resource.as_ref().map(sensitive).unwrap_or_default(),
            private: resource.as_ref().map(|_| format!("private-of-{id}")),
            resource,
        })
    }

    fn import(&self, request: &ImportRequest) -> PluginResult<ReadResponse> {
        let resource = self.load(&request.planned.id)?;
        Ok(ReadResponse {
            sensitive_paths: resource.as_ref().map(sensitive).unwrap_or_default(),
            private: None,
            resource,
        })
    }

    fn delete(&self, request: &DeleteRequest) -> PluginResult<()> {
        let path = self.object_path(&request.resource.id)?;
        match fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(PluginError::new(ErrorKind::Unavailable, e.to_string())),
        }
    }

    fn watch(&self, request: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
        let attrs = &request.resource.attributes;
        Ok(Box::new(TestWatch {
            name: request.resource.id.clone(),
            remaining: attrs
                .get("readyAfterPolls")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            failed: attrs.get("testHealth").and_then(Value::as_str) == Some("failed"),
            done: false,
        }))
    }
}

struct TestWatch {
    name: String,
    remaining: u64,
    failed: bool,
    done: bool,
}

impl Watch for TestWatch {
    fn poll(&mut self, timeout: Duration) -> PluginResult<WatchPoll> {
        if self.done {
            return Ok(WatchPoll::Closed);
        }
        std::thread::sleep(timeout.min(Duration::from_millis(5)));
        let (health, detail) = if self.failed {
            self.done = true;
            (
                Health::Failed,
                "CrashLoopBackOff: the test object is unhealthy".to_string(),
            )
        } else if self.remaining > 0 {
            self.remaining -= 1;
            (
                Health::Progressing,
                format!("{} polls to go", self.remaining + 1),
            )
        } else {
            self.done = true;
            (Health::Ready, "ready".to_string())
        };
        Ok(WatchPoll::Event(WatchEvent {
            health,
            detail: detail.clone(),
            objects: vec![ObjectStatus {
                kind: "TestObject".into(),
                name: self.name.clone(),
                health,
                detail,
            }],
            object: None,
        }))
    }
}

// Loadable as a native plugin (plugin.toml beside Cargo.toml), so the engine is tested end to end
// through the plugin ABI, not only in-process.
kusion_sdk::export_runtime!(TestRuntime::new);
