//! The runtime's configuration (`configure`): which cluster, how applies and deletes behave.

use std::path::PathBuf;

use kube::api::PropagationPolicy;
use serde::Deserialize;
use serde_json::{Map, Value};

/// How dependents of a deleted object are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub(crate) fn policy(self) -> PropagationPolicy {
        match self {
            Propagation::Background => PropagationPolicy::Background,
            Propagation::Foreground => PropagationPolicy::Foreground,
            Propagation::Orphan => PropagationPolicy::Orphan,
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Propagation> {
        match text {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }
}

/// The runtime configuration (`configure`), all fields optional.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Kubeconfig file of the stack; unset means `$KUBECONFIG`, then `~/.kube/config`.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Context inside the kubeconfig; unset means its current context.
    #[serde(default)]
    pub context: Option<String>,
    /// Take ownership of fields another field manager owns instead of failing with a conflict
    /// (kubectl's `--force-conflicts`; kusionctl's flag of that name sets it).
    #[serde(default)]
    pub force: bool,
    #[serde(default = "default_manager")]
    pub field_manager: String,
    #[serde(default)]
    pub delete_propagation: Propagation,
    /// Wait until a deleted object is really gone (finalizers done) before returning.
    #[serde(default = "yes")]
    pub wait_for_delete: bool,
    /// How long a real apply waits for a kind the server does not serve yet (its CRD being
    /// created or established), in seconds.
    #[serde(default = "default_kind_wait")]
    pub kind_wait_seconds: u64,
    /// How often `watch` asks again for a kind the server does not serve yet (its CRD being
    /// established), in milliseconds; once it is served, changes arrive by watch streams.
    #[serde(default = "default_interval")]
    pub watch_interval_ms: u64,
    /// Answer a plan's dry-run from the read just before it when that read already says what
    /// the server would answer (see `answer_from_read`); off sends every dry-run to the server.
    #[serde(default = "yes")]
    pub answer_from_read: bool,
}

fn yes() -> bool {
    true
}
fn default_manager() -> String {
    "kusion".into()
}
fn default_kind_wait() -> u64 {
    30
}
fn default_interval() -> u64 {
    500
}

impl Default for Settings {
    fn default() -> Self {
        serde_json::from_value(Value::Object(Map::new())).expect("all settings have defaults")
    }
}
