//! Ctrl-C during a command: the first stops new work (the kernel's cancel flag), the second
//! leaves at once after a registered hook (a run's record) has made what it must durable.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use crate::render;

type ExitHook = Box<dyn Fn() + Send + Sync>;

/// What must be made durable before a second Ctrl-C ends the process (a run's record).
static FORCED_EXIT: std::sync::Mutex<Option<ExitHook>> = std::sync::Mutex::new(None);

/// Run `hook` (once) before a second Ctrl-C exits.
pub fn on_forced_exit(hook: ExitHook) {
    *FORCED_EXIT.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook);
}

/// First Ctrl-C: stop starting new work; second: leave at once (the journal is consistent,
/// and a registered hook closes what it must first).
pub(crate) fn install_interrupt(cancel: Arc<AtomicBool>, json: bool) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.store(true, Ordering::SeqCst);
            let message = "Interrupted: no new steps start; running steps finish or time out, then state is saved. Ctrl-C again to quit now.";
            if json {
                eprintln!(
                    "{}",
                    json!({"event": "interrupted", "time": render::now_rfc3339(), "message": message})
                );
            } else {
                eprintln!("\n{message}");
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                if let Some(hook) = FORCED_EXIT.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    hook();
                }
                std::process::exit(130);
            }
        }
    });
}
