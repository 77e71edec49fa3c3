//! `kusionctl compile --all`: every stack under a Konfig root, on all cores, sharing parsed
//! packages, and incremental: a stack whose inputs (every file its last compile read, and the
//! `.k` listing of their folders) hash the same as last time is not compiled again.
//!
//! Cache layout: `ROOT/.kusion/compile-cache/<stack path>/{inputs.json,spec.yaml}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use kusion_kcl::ParseCache;
use serde::{Deserialize, Serialize};

use super::{FileHashes, KclFailure, compile_stack, render_spec};
use crate::kcl_plugins::{LazyHook, LazyPlugins};
use crate::project;

thread_local! {
    /// Each compile thread's plugin hook (the evaluator takes an `Rc`).
    static HOOK: std::cell::OnceCell<Rc<LazyHook>> = const { std::cell::OnceCell::new() };
}

/// Options of one `compile --all`.
pub struct AllOptions {
    pub root: PathBuf,
    /// Worker threads (0: one per core).
    pub jobs: usize,
    /// Ignore the cache and compile everything.
    pub force: bool,
    /// Serves `kcl_plugin.*` calls (loaded on the first one).
    pub plugins: Arc<LazyPlugins>,
}

/// What happened to one stack.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackResult {
    /// The stack folder relative to the root.
    pub stack: String,
    /// Where its spec was written (when it compiled).
    pub spec: Option<PathBuf>,
    /// True when the spec came from the cache.
    pub cached: bool,
    pub error: Option<String>,
    /// For KCL errors: exactly what `kcl run` prints.
    #[serde(skip)]
    pub kcl_error: Option<String>,
}

/// The whole run.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub root: PathBuf,
    pub cache_dir: PathBuf,
    pub stacks: Vec<StackResult>,
    pub compiled: usize,
    pub cached: usize,
    pub failed: usize,
    pub threads: usize,
    pub seconds: f64,
}

#[derive(Serialize, Deserialize)]
struct CacheEntry {
    compiler: String,
    /// path -> content hash; `<dir>/\0listing` -> hash of the folder's `.k` names.
    inputs: BTreeMap<PathBuf, String>,
}

pub fn cache_dir(root: &Path) -> PathBuf {
    root.join(".kusion").join("compile-cache")
}

/// Identifies the compiler: a rebuilt kusionctl may compile differently, so it invalidates.
fn compiler_id() -> String {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::metadata(p).ok());
    let stamp = exe
        .map(|m| {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}-{t}", m.len())
        })
        .unwrap_or_default();
    format!("kusionctl {} {stamp}", env!("CARGO_PKG_VERSION"))
}

fn listing_key(dir: &Path) -> PathBuf {
    dir.join("\0listing")
}

fn up_to_date(entry: &CacheEntry, compiler: &str, hashes: &FileHashes) -> bool {
    entry.compiler == compiler
        && entry.inputs.iter().all(|(path, hash)| {
            let now = match path.file_name().and_then(|n| n.to_str()) {
                Some("\0listing") => path.parent().and_then(|d| hashes.dir_listing(d)),
                _ => hashes.get(path),
            };
            now.as_deref() == Some(hash.as_str())
        })
}

/// Compile every stack under `options.root`.
pub fn compile_all(options: &AllOptions) -> Result<Summary> {
    let started = std::time::Instant::now();
    let root = project::normalize(&std::path::absolute(&options.root)?);
    let stacks = project::discover_stacks(&root)?;
    let cache_root = cache_dir(&root);
    let threads = if options.jobs == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        options.jobs
    }
    .clamp(1, stacks.len().max(1));
    let parse_cache = Arc::new(ParseCache::new());
    let hashes = FileHashes::default();
    let compiler = compiler_id();
    let next = AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<StackResult>>> =
        stacks.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let work = |i: usize| -> StackResult {
        let dir = &stacks[i];
        let rel = dir.strip_prefix(&root).unwrap_or(dir).to_path_buf();
        let entry_dir = cache_root.join(&rel);
        let spec_file = entry_dir.join("spec.yaml");
        let entry_file = entry_dir.join("inputs.json");
        let stack = rel.display().to_string();
        if !options.force
            && spec_file.is_file()
            && let Ok(text) = std::fs::read_to_string(&entry_file)
            && let Ok(entry) = serde_json::from_str::<CacheEntry>(&text)
            && up_to_date(&entry, &compiler, &hashes)
        {
            return StackResult {
                stack,
                spec: Some(spec_file),
                cached: true,
                error: None,
                kcl_error: None,
            };
        }
        let hook = HOOK.with(|h| {
            h.get_or_init(|| Rc::new(LazyHook::new(options.plugins.clone())))
                .clone()
        });
        let calls_before = hook.calls();
        let compiled = project::open_stack(dir)
            .and_then(|s| compile_stack(&s, Some(parse_cache.clone()), Some(hook.clone())));
        // A program that asked a plugin depends on more than its files: never cached.
        let cacheable = hook.calls() == calls_before;
        let compiled = match compiled {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(&entry_file);
                let kcl_error = e.downcast_ref::<KclFailure>().map(|k| k.rendered.clone());
                return StackResult {
                    stack,
                    spec: None,
                    cached: false,
                    error: Some(format!("{e:#}")),
                    kcl_error,
                };
            }
        };
        let mut inputs = BTreeMap::new();
        for f in &compiled.inputs {
            if let Some(h) = hashes.get(f) {
                inputs.insert(f.clone(), h);
            }
            if let Some(d) = f.parent()
                && let Some(h) = hashes.dir_listing(d)
            {
                inputs.insert(listing_key(d), h);
            }
        }
        let entry = CacheEntry {
            compiler: compiler.clone(),
            inputs,
        };
        let written = std::fs::create_dir_all(&entry_dir)
            .and_then(|_| std::fs::write(&spec_file, render_spec(&compiled.spec, false)))
            .and_then(|_| {
                if cacheable {
                    std::fs::write(
                        &entry_file,
                        serde_json::to_string(&entry).unwrap_or_default(),
                    )
                } else {
                    match std::fs::remove_file(&entry_file) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                        _ => Ok(()),
                    }
                }
            });
        match written {
            Ok(()) => StackResult {
                stack,
                spec: Some(spec_file),
                cached: false,
                error: None,
                kcl_error: None,
            },
            Err(e) => StackResult {
                stack,
                spec: None,
                cached: false,
                error: Some(format!("writing {}: {e}", entry_dir.display())),
                kcl_error: None,
            },
        }
    };
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::new();
        for t in 0..threads {
            let h = std::thread::Builder::new()
                .name(format!("compile-{t}"))
                // deep KCL programs recurse; the main thread has 8 MiB, workers get as much
                .stack_size(64 << 20)
                .spawn_scoped(scope, || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= stacks.len() {
                            break;
                        }
                        let r = work(i);
                        *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    }
                })
                .context("starting a compile thread")?;
            handles.push(h);
        }
        for h in handles {
            if h.join().is_err() {
                anyhow::bail!("a compile thread panicked");
            }
        }
        Ok(())
    })?;
    let stacks: Vec<StackResult> = results
        .into_iter()
        .filter_map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect();
    let cached = stacks.iter().filter(|r| r.cached).count();
    let failed = stacks.iter().filter(|r| r.error.is_some()).count();
    tracing::info!(parse_cache = ?parse_cache.stats(), "compile --all done");
    Ok(Summary {
        root,
        cache_dir: cache_root,
        compiled: stacks.len() - cached - failed,
        cached,
        failed,
        threads,
        seconds: started.elapsed().as_secs_f64(),
        stacks,
    })
}
