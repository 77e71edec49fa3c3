//! Opening one stack's state store on each backend the conformance suites run over: a local
//! directory, PostgreSQL (a server the test started) and S3 (moto started by the test).

use std::path::Path;
use std::sync::Arc;

use kusion_kernel::state::{self, S3Config, StateStore};

use crate::servers::MotoServer;

/// Opens a fresh store for `stack`; several calls with the same stack are several "processes".
pub type Opener<'a> = dyn Fn(&str) -> Arc<dyn StateStore> + Sync + 'a;

/// Stores in `dir/<stack>`.
pub fn local(dir: &Path) -> impl Fn(&str) -> Arc<dyn StateStore> + Sync + '_ {
    move |stack| {
        state::open(
            &format!("local:{}", dir.join(stack).display()),
            "unused".into(),
            stack,
        )
        .unwrap_or_else(|e| panic!("opening the local store of {stack}: {e}"))
    }
}

/// Stores in the PostgreSQL database at `url`.
pub fn postgres(url: &str) -> impl Fn(&str) -> Arc<dyn StateStore> + Sync + '_ {
    move |stack| {
        state::open(url, "unused".into(), stack)
            .unwrap_or_else(|e| panic!("opening the PostgreSQL store of {stack}: {e}"))
    }
}

/// Where `stack` lives in `bucket` of the test's moto.
pub fn s3_config(moto: &MotoServer, bucket: &str, stack: &str) -> S3Config {
    let (key, secret) = MotoServer::credentials();
    S3Config {
        bucket: bucket.into(),
        prefix: format!("stacks/{stack}"),
        endpoint: Some(moto.endpoint()),
        region: "us-east-1".into(),
        path_style: true,
        credentials: Some((key.into(), secret.into(), None)),
    }
}

/// Stores under `stacks/<stack>` in `bucket` (which must exist) of the test's moto.
pub fn s3<'a>(
    moto: &'a MotoServer,
    bucket: &'a str,
) -> impl Fn(&str) -> Arc<dyn StateStore> + Sync + 'a {
    move |stack| {
        Arc::new(
            state::S3Store::new(&s3_config(moto, bucket, stack))
                .unwrap_or_else(|e| panic!("opening the S3 store of {stack}: {e}")),
        ) as Arc<dyn StateStore>
    }
}
