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
    pub version: String,
    pub abi: AbiVersion,
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

pub trait FunctionPlugin: Send + Sync {
    fn describe(&self) -> FunctionPluginInfo;
    fn configure(&self, config: &Value) -> PluginResult<()>;
    /// Call `function` with positional and keyword arguments; JSON-shaped values in and out.
    fn call(
        &self,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> PluginResult<Value>;
}
