//! KCL function plugins: `import kcl_plugin.<module>` then `<module>.<fn>(args, kwargs)`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::AbiVersion;
use crate::error::PluginResult;

/// Who a function plugin is and which functions it exports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionPluginInfo {
    /// The module name KCL code imports (`cmdb` for `kcl_plugin.cmdb`).
    pub module: String,
    /// The plugin's own version (free text, usually `CARGO_PKG_VERSION`), shown by
    /// `kusionctl plugin list`.
    pub version: String,
    /// The contract the plugin was built against: [`crate::ABI_VERSION`]. The host refuses a
    /// plugin whose version it does not [accept](AbiVersion::accepts).
    pub abi: AbiVersion,
    /// The function names [`FunctionPlugin::call`] serves. A KCL call to any other name fails
    /// in the host, naming these, without reaching the plugin.
    pub functions: Vec<String>,
    /// The secret-reference schemes this plugin resolves (`aws-secretsmanager` for
    /// `ref://aws-secretsmanager/NAME#KEY`). A plugin naming any is a secret store: the kernel
    /// calls its [`SECRET_RESOLVE`] function with the whole reference while planning and
    /// applying, and KCL programs cannot import it (a program could print what it returns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_stores: Vec<String>,
}

/// The function a secret store exports: one positional argument, the whole reference
/// (`ref://<scheme>/<path>[#<key>]`); the keyword argument `workdir` is the stack folder (for
/// relative paths). Answers the secret as a JSON string.
pub const SECRET_RESOLVE: &str = "resolve";

/// A function plugin: functions KCL programs call as `kcl_plugin.<module>.<fn>(...)`, or a
/// secret store the kernel calls (see [`FunctionPluginInfo::secret_stores`]).
///
/// Calls may arrive from several threads at once; keep connections and caches behind a lock.
pub trait FunctionPlugin: Send + Sync {
    /// Who the plugin is and what it exports. The host asks when it loads the plugin and may
    /// ask again: keep it cheap, and the same for the plugin's lifetime.
    fn describe(&self) -> FunctionPluginInfo;
    /// The operator's configuration (`[plugins.settings.<name>] config = {...}`), handed over
    /// once after loading; not called when there is none. Check it here and fail with
    /// `InvalidInput` naming the bad key: an error keeps the plugin from loading.
    fn configure(&self, config: &Value) -> PluginResult<()>;
    /// Call `function` with positional and keyword arguments; JSON-shaped values in and out.
    fn call(
        &self,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> PluginResult<Value>;
}
