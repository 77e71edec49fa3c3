//! The shipped secret store: resolves `ref://` spec values for the kernel while it plans and
//! applies (see `kernel/src/secret_ref.rs`). A function plugin that declares secret-store
//! schemes, so KCL programs cannot import it.
//!
//! - `ref://aws-secretsmanager/<name or ARN>[#<key>]`: `GetSecretValue`'s `SecretString`; with
//!   `#key`, that field of the secret's JSON object.
//! - `ref://env/<NAME>`: the variable of kusionctl's environment (the usual way CI hands a run
//!   its secrets); the `env` setting narrows which names may be read.
//! - `ref://file/<path>[#<key>]`: the file's text without one trailing newline; with `#key`, a
//!   field of the file's JSON object. A relative path is read from the stack folder. Only files
//!   inside the stack folder or under a `fileRoots` folder are read (symbolic links resolved),
//!   so a spec cannot send a file of the machine that applies it (`/etc`, `~/.aws`) to a cluster.
//!
//! Settings (`[plugins.secrets.config]`): `fileRoots` (folders beside the stack folder files
//! may be read from), `env` (name patterns, `*` as a suffix wildcard; every name when unset),
//! `awsEndpoint` (else the `AWS_ENDPOINT_URL_SECRETS_MANAGER`/`AWS_ENDPOINT_URL` environment).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kusion_sdk::function::{FunctionPlugin, FunctionPluginInfo, SECRET_RESOLVE};
use kusion_sdk::{ABI_VERSION, ErrorKind, Map, PluginError, PluginResult, Value};

/// The schemes this plugin serves.
pub const SCHEMES: [&str; 3] = ["aws-secretsmanager", "env", "file"];

#[derive(Debug, Clone, Default)]
struct Settings {
    file_roots: Vec<PathBuf>,
    env: Option<Vec<String>>,
    aws_endpoint: Option<String>,
}

/// The plugin.
#[derive(Default)]
pub struct Secrets {
    settings: Mutex<Settings>,
}

impl Secrets {
    pub fn new() -> Secrets {
        Secrets::default()
    }

    fn settings(&self) -> Settings {
        self.settings.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The secret `reference` names; `workdir` is the stack folder.
    pub fn resolve(&self, reference: &str, workdir: Option<&Path>) -> PluginResult<String> {
        let rest = reference
            .strip_prefix("ref://")
            .ok_or_else(|| PluginError::invalid(format!("{reference:?} is not a ref:// value")))?;
        let (scheme, rest) = rest.split_once('/').unwrap_or((rest, ""));
        let (name, key) = match rest.rsplit_once('#') {
            Some((name, key)) => (name, Some(key)),
            None => (rest, None),
        };
        if name.is_empty() {
            return Err(PluginError::invalid(format!(
                "{reference}: no name after ref://{scheme}/"
            )));
        }
        let settings = self.settings();
        match scheme {
            "env" => {
                if key.is_some() {
                    return Err(PluginError::invalid(format!(
                        "{reference}: an environment variable has no #key"
                    )));
                }
                if let Some(allowed) = &settings.env
                    && !allowed.iter().any(|p| matches(p, name))
                {
                    return Err(PluginError::invalid(format!(
                        "{reference}: {name} is not among the variables the secrets plugin may read (its `env` setting: {})",
                        allowed.join(", ")
                    )));
                }
                std::env::var(name).map_err(|_| {
                    PluginError::invalid(format!(
                        "{reference}: the environment has no variable {name}"
                    ))
                })
            }
            "file" => {
                let text = read_file(name, workdir, &settings.file_roots)
                    .map_err(|e| PluginError::invalid(format!("{reference}: {e}")))?;
                match key {
                    None => Ok(text
                        .strip_suffix('\n')
                        .map(|t| t.strip_suffix('\r').unwrap_or(t))
                        .unwrap_or(&text)
                        .to_string()),
                    Some(key) => field(&text, key)
                        .map_err(|e| PluginError::invalid(format!("{reference}: the file {e}"))),
                }
            }
            "aws-secretsmanager" => {
                let service = kusion_aws::JsonService::from_env_with(
                    &kusion_aws::SECRETS_MANAGER,
                    settings.aws_endpoint.as_deref(),
                )
                .map_err(|e| PluginError::invalid(format!("{reference}: {e}")))?;
                let answer = service
                    .call("GetSecretValue", &serde_json::json!({"SecretId": name}))
                    .map_err(|e| {
                        let kind = match &e {
                            kusion_aws::AwsError::Transport { .. } => ErrorKind::Unavailable,
                            kusion_aws::AwsError::Service { status, .. } if *status >= 500 => {
                                ErrorKind::Unavailable
                            }
                            _ => ErrorKind::InvalidInput,
                        };
                        PluginError::new(kind, format!("{reference}: {e}"))
                    })?;
                let text = answer
                    .get("SecretString")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        PluginError::invalid(format!(
                            "{reference}: the secret has no SecretString (binary secrets are not read)"
                        ))
                    })?;
                match key {
                    None => Ok(text.to_string()),
                    Some(key) => field(text, key)
                        .map_err(|e| PluginError::invalid(format!("{reference}: the secret {e}"))),
                }
            }
            other => Err(PluginError::invalid(format!(
                "{reference}: this plugin serves {} but not {other:?}",
                SCHEMES.join(", ")
            ))),
        }
    }
}

/// `*` at the end matches any suffix; otherwise the whole name.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Field `key` of the JSON object `text`: a string as it is, anything else as JSON.
fn field(text: &str, key: &str) -> Result<String, String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("is not a JSON object ({e}), so #{key} names nothing"))?;
    match value.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Ok(other.to_string()),
        None => Err(format!("has no field {key:?}")),
    }
}

fn read_file(name: &str, workdir: Option<&Path>, roots: &[PathBuf]) -> Result<String, String> {
    let base = match workdir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().map_err(|e| format!("the working folder: {e}"))?,
    };
    let path = base.join(name);
    let real = path
        .canonicalize()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let inside = std::iter::once(&base)
        .chain(roots)
        .filter_map(|r| r.canonicalize().ok())
        .any(|r| real.starts_with(r));
    if !inside {
        return Err(format!(
            "{} is outside the stack folder {}; list its folder in the secrets plugin's `fileRoots` setting to allow it",
            real.display(),
            base.display()
        ));
    }
    std::fs::read_to_string(&real).map_err(|e| format!("{}: {e}", real.display()))
}

impl FunctionPlugin for Secrets {
    fn describe(&self) -> FunctionPluginInfo {
        FunctionPluginInfo {
            module: "secrets".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: ABI_VERSION,
            functions: vec![SECRET_RESOLVE.into()],
            secret_stores: SCHEMES.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// `{fileRoots = [...], env = [...], awsEndpoint = "..."}`; `null` restores the defaults.
    fn configure(&self, config: &Value) -> PluginResult<()> {
        let mut settings = Settings::default();
        if let Some(map) = config.as_object() {
            for (k, v) in map {
                let strings = || -> PluginResult<Vec<String>> {
                    v.as_array()
                        .and_then(|a| a.iter().map(|s| s.as_str().map(String::from)).collect())
                        .ok_or_else(|| {
                            PluginError::invalid(format!(
                                "secrets setting {k}: expected a list of strings"
                            ))
                        })
                };
                match k.as_str() {
                    "fileRoots" => {
                        settings.file_roots = strings()?.into_iter().map(PathBuf::from).collect()
                    }
                    "env" => settings.env = Some(strings()?),
                    "awsEndpoint" => {
                        settings.aws_endpoint = Some(
                            v.as_str()
                                .ok_or_else(|| {
                                    PluginError::invalid(
                                        "secrets setting awsEndpoint: expected a URL",
                                    )
                                })?
                                .to_string(),
                        )
                    }
                    other => {
                        return Err(PluginError::invalid(format!(
                            "secrets: unknown setting {other:?} (fileRoots, env, awsEndpoint)"
                        )));
                    }
                }
            }
        } else if !config.is_null() {
            return Err(PluginError::invalid("secrets: settings are a table"));
        }
        *self
            .settings
            .lock()
            .map_err(|_| PluginError::internal("settings lock poisoned"))? = settings;
        Ok(())
    }

    fn call(
        &self,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> PluginResult<Value> {
        if function != SECRET_RESOLVE {
            return Err(PluginError::new(
                ErrorKind::Unsupported,
                format!("secrets has no function {function:?} (only {SECRET_RESOLVE})"),
            ));
        }
        let [Value::String(reference)] = args else {
            return Err(PluginError::invalid(
                "resolve takes one string: the ref:// value",
            ));
        };
        let workdir = kwargs.get("workdir").and_then(Value::as_str).map(Path::new);
        self.resolve(reference, workdir).map(Value::String)
    }
}

kusion_sdk::export_function_plugin!(Secrets::new);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_inside_the_stack_folder_or_allowed_roots_only() {
        let stack = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(stack.path().join("pw"), "hunter2\n").unwrap();
        std::fs::write(
            stack.path().join("db.json"),
            r#"{"user": "app", "port": 5432}"#,
        )
        .unwrap();
        std::fs::write(outside.path().join("key"), "k").unwrap();
        std::os::unix::fs::symlink(outside.path().join("key"), stack.path().join("link")).unwrap();
        let s = Secrets::new();
        let at = Some(stack.path());
        assert_eq!(s.resolve("ref://file/pw", at).unwrap(), "hunter2");
        assert_eq!(s.resolve("ref://file/db.json#user", at).unwrap(), "app");
        assert_eq!(s.resolve("ref://file/db.json#port", at).unwrap(), "5432");
        let e = s
            .resolve("ref://file/db.json#nope", at)
            .unwrap_err()
            .message;
        assert!(e.contains("no field \"nope\""), "{e}");
        for escape in [
            "ref://file/link",
            "ref://file/../x",
            &format!("ref://file/{}", outside.path().join("key").display()),
        ] {
            let e = s.resolve(escape, at).unwrap_err().message;
            assert!(
                e.contains("outside the stack folder") || e.contains("No such file"),
                "{escape}: {e}"
            );
        }
        s.configure(&serde_json::json!({"fileRoots": [outside.path()]}))
            .unwrap();
        assert_eq!(s.resolve("ref://file/link", at).unwrap(), "k");
    }

    #[test]
    fn environment_variables_are_read_as_the_env_setting_allows() {
        // SAFETY: a name no other test reads or writes.
        unsafe { std::env::set_var("KUSION_SECRETS_TEST_PW", "s3cret") };
        let s = Secrets::new();
        assert_eq!(
            s.resolve("ref://env/KUSION_SECRETS_TEST_PW", None).unwrap(),
            "s3cret"
        );
        let e = s
            .resolve("ref://env/KUSION_SECRETS_TEST_MISSING", None)
            .unwrap_err()
            .message;
        assert!(e.contains("no variable KUSION_SECRETS_TEST_MISSING"), "{e}");
        s.configure(&serde_json::json!({"env": ["APP_*"]})).unwrap();
        let e = s
            .resolve("ref://env/KUSION_SECRETS_TEST_PW", None)
            .unwrap_err()
            .message;
        assert!(e.contains("not among the variables"), "{e}");
        assert!(s.configure(&serde_json::json!({"nope": 1})).is_err());
    }

    #[test]
    fn it_declares_itself_a_secret_store_and_refuses_other_calls() {
        let s = Secrets::new();
        assert_eq!(s.describe().secret_stores, SCHEMES);
        assert!(s.call("lookup", &[], &Map::new()).is_err());
        assert!(
            s.resolve("ref://vault/x", None)
                .unwrap_err()
                .message
                .contains("not \"vault\"")
        );
    }
}
