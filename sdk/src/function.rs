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
}

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
