//! Choosing a state backend from one string: `local` (default), a `postgres://` URL or an
//! `s3://bucket/prefix` URL, as given by `--state-backend` or a stack's configuration.
//!
//! Remote backends hold many stacks, so they need the stack's name: the `stack` query parameter,
//! else the caller's default (the CLI derives it from the stack folder).
//!
//! - `postgres://user:pass@host:port/db?stack=NAME` (libpq URL parameters are passed through);
//! - `s3://bucket/prefix?endpoint=http://127.0.0.1:5000&region=us-east-1&path_style=true`;
//!   `endpoint` falls back to `AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL`; `region` to
//!   `AWS_REGION`, then `AWS_DEFAULT_REGION`, then `us-east-1`; credentials come from
//!   `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN` (unsigned without them).
//!   The stack name becomes the last part of the key prefix.

use std::path::PathBuf;
use std::sync::Arc;

use super::{LocalStore, StateError, StateStore};

/// A parsed backend choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A directory on the local disk.
    Local(PathBuf),
    /// A PostgreSQL URL (without kusion's own parameters) and the stack name.
    Postgres {
        /// The connection URL.
        url: String,
        /// The stack's name in the tables.
        stack: String,
    },
    /// An S3 bucket (or an S3-compatible store).
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix the stack's objects live under.
        prefix: String,
        /// The endpoint URL (None: AWS's for the region).
        endpoint: Option<String>,
        /// The region.
        region: String,
        /// Whether to address the bucket in the path rather than the host name.
        path_style: bool,
    },
}

fn bad(spec: &str, message: impl std::fmt::Display) -> StateError {
    StateError::Io {
        location: spec.to_string(),
        message: format!("bad state backend: {message}"),
    }
}

impl Backend {
    /// Parse `spec`; `local_dir` is where `local` keeps state, `default_stack` names the stack
    /// in a remote backend when the URL does not.
    pub fn parse(
        spec: &str,
        local_dir: PathBuf,
        default_stack: &str,
    ) -> Result<Backend, StateError> {
        let spec = spec.trim();
        if spec.is_empty() || spec == "local" {
            return Ok(Backend::Local(local_dir));
        }
        if let Some(path) = spec.strip_prefix("local:") {
            return Ok(Backend::Local(PathBuf::from(path)));
        }
        let mut url = url::Url::parse(spec).map_err(|e| bad(spec, e))?;
        let mut stack = None;
        let mut endpoint = None;
        let mut region = None;
        let mut path_style = None;
        let mut rest = Vec::new();
        for (k, v) in url.query_pairs() {
            match k.as_ref() {
                "stack" => stack = Some(v.into_owned()),
                "endpoint" if url.scheme() == "s3" => endpoint = Some(v.into_owned()),
                "region" if url.scheme() == "s3" => region = Some(v.into_owned()),
                "path_style" if url.scheme() == "s3" => path_style = Some(v != "false"),
                _ => rest.push((k.into_owned(), v.into_owned())),
            }
        }
        let stack = stack.unwrap_or_else(|| default_stack.to_string());
        if stack.is_empty() {
            return Err(bad(spec, "no stack name (add ?stack=NAME)"));
        }
        match url.scheme() {
            "postgres" | "postgresql" => {
                if rest.is_empty() {
                    url.set_query(None);
                } else {
                    url.query_pairs_mut().clear().extend_pairs(rest);
                }
                Ok(Backend::Postgres {
                    url: url.to_string(),
                    stack,
                })
            }
            "s3" => {
                if let Some((k, _)) = rest.first() {
                    return Err(bad(spec, format!("unknown parameter {k:?}")));
                }
                let bucket = url
                    .host_str()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| bad(spec, "no bucket (s3://BUCKET/PREFIX)"))?
                    .to_string();
                let base = url.path().trim_matches('/');
                let prefix = if base.is_empty() {
                    stack
                } else {
                    format!("{base}/{stack}")
                };
                let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
                let endpoint = endpoint
                    .or_else(|| env("AWS_ENDPOINT_URL_S3"))
                    .or_else(|| env("AWS_ENDPOINT_URL"));
                Ok(Backend::S3 {
                    bucket,
                    prefix,
                    path_style: path_style.unwrap_or(endpoint.is_some()),
                    endpoint,
                    region: region
                        .or_else(|| env("AWS_REGION"))
                        .or_else(|| env("AWS_DEFAULT_REGION"))
                        .unwrap_or_else(|| "us-east-1".to_string()),
                })
            }
            other => Err(bad(
                spec,
                format!("unknown scheme {other:?} (use local, postgres://... or s3://...)"),
            )),
        }
    }

    /// Connect to the backend.
    pub fn open(&self) -> Result<Arc<dyn StateStore>, StateError> {
        Ok(match self {
            Backend::Local(dir) => Arc::new(LocalStore::new(dir)),
            #[cfg(feature = "postgres")]
            Backend::Postgres { url, stack } => {
                Arc::new(super::PostgresStore::connect(url, stack)?)
            }
            #[cfg(not(feature = "postgres"))]
            Backend::Postgres { .. } => return Err(left_out("PostgreSQL", "postgres")),
            #[cfg(not(feature = "s3"))]
            Backend::S3 { .. } => return Err(left_out("S3", "s3")),
            #[cfg(feature = "s3")]
            Backend::S3 {
                bucket,
                prefix,
                endpoint,
                region,
                path_style,
            } => {
                let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
                let credentials = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
                    (Some(k), Some(s)) => Some((k, s, env("AWS_SESSION_TOKEN"))),
                    _ => None,
                };
                Arc::new(super::S3Store::new(&super::S3Config {
                    bucket: bucket.clone(),
                    prefix: prefix.clone(),
                    endpoint: endpoint.clone(),
                    region: region.clone(),
                    path_style: *path_style,
                    credentials,
                })?)
            }
        })
    }
}

/// A backend this build was made without.
#[cfg(not(all(feature = "postgres", feature = "s3")))]
fn left_out(what: &str, feature: &str) -> StateError {
    StateError::Io {
        location: what.to_string(),
        message: format!(
            "this build of kusion has no {what} state backend (kusion-kernel feature `{feature}`)"
        ),
    }
}

/// Parse and open in one step.
pub fn open(
    spec: &str,
    local_dir: PathBuf,
    default_stack: &str,
) -> Result<Arc<dyn StateStore>, StateError> {
    Backend::parse(spec, local_dir, default_stack)?.open()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_backend() {
        let local = PathBuf::from("/tmp/s");
        assert_eq!(
            Backend::parse("local", local.clone(), "p/dev").unwrap(),
            Backend::Local(local.clone())
        );
        assert_eq!(
            Backend::parse(
                "postgres://u:p@h:5/db?stack=app&sslmode=disable",
                local.clone(),
                "x"
            )
            .unwrap(),
            Backend::Postgres {
                url: "postgres://u:p@h:5/db?sslmode=disable".into(),
                stack: "app".into()
            }
        );
        match Backend::parse(
            "s3://bkt/states?endpoint=http://127.0.0.1:9&region=eu-west-1",
            local.clone(),
            "proj/dev",
        )
        .unwrap()
        {
            Backend::S3 {
                bucket,
                prefix,
                endpoint,
                region,
                path_style,
            } => {
                assert_eq!(bucket, "bkt");
                assert_eq!(prefix, "states/proj/dev");
                assert_eq!(endpoint.as_deref(), Some("http://127.0.0.1:9"));
                assert_eq!(region, "eu-west-1");
                assert!(path_style);
            }
            other => panic!("{other:?}"),
        }
        let e = Backend::parse("ftp://x", local.clone(), "s").unwrap_err();
        assert!(e.to_string().contains("unknown scheme"), "{e}");
        let e = Backend::parse("s3://b/p?bogus=1", local, "s").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }
}
