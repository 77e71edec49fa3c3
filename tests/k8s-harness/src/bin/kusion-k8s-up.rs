//! Brings up a local control plane (etcd + kube-apiserver + kube-controller-manager + fake
//! kubelet) and keeps it running until interrupted. Prints the kubeconfig path first.
//!
//! `cargo run -p kusion-k8s-harness --bin kusion-k8s-up [-- --kubeconfig-out PATH]`

use std::path::PathBuf;

use anyhow::Context;
use kusion_k8s_harness::ControlPlane;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut copy_to: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--kubeconfig-out" => {
                copy_to = Some(args.next().context("--kubeconfig-out needs a path")?.into())
            }
            other => anyhow::bail!(
                "unknown argument {other:?} (usage: kusion-k8s-up [--kubeconfig-out PATH])"
            ),
        }
    }
    let cp = ControlPlane::start().context("starting the local control plane")?;
    let kubeconfig = match copy_to {
        Some(path) => {
            std::fs::copy(cp.kubeconfig_path(), &path)
                .with_context(|| format!("writing {}", path.display()))?;
            path
        }
        None => cp.kubeconfig_path().to_path_buf(),
    };
    println!("KUBECONFIG={}", kubeconfig.display());
    println!(
        "server {} ; logs in {}/logs ; Ctrl-C stops it",
        cp.server(),
        cp.dir().display()
    );
    let rt = cp.runtime();
    rt.block_on(tokio::signal::ctrl_c())
        .context("waiting for Ctrl-C")?;
    drop(cp);
    Ok(())
}
