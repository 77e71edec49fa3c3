//! `kusionctl graph`: the spec's dependency DAG as text, Graphviz dot, or JSON nodes and edges.

use std::path::PathBuf;

use anyhow::Result;
use kusion_kernel::graph::Dag;
use serde_json::json;

use crate::args::{GraphFormat, Output};
use crate::context::{CommandContext, load_spec};
use crate::exit;

/// Print the DAG of the spec (`-f`, or the stack's compiled spec).
pub(crate) fn run(ctx: &CommandContext, spec: &Option<PathBuf>, format: GraphFormat) -> Result<u8> {
    let spec = load_spec(ctx, spec)?;
    spec.validate(&ctx.stack.registry.types())
        .or_else(|e| match e {
            // The graph does not need runtimes: only structural errors matter here.
            kusion_kernel::spec::SpecError::UnknownType { .. } => Ok(()),
            other => Err(other),
        })?;
    let dag = Dag::build(&spec)?;
    match (ctx.output, format) {
        (Output::Json, _) => println!(
            "{}",
            json!({"nodes": dag.order().collect::<Vec<_>>(), "edges": dag.edges().iter().map(|(a, b)| json!({"from": a, "to": b})).collect::<Vec<_>>()})
        ),
        (_, GraphFormat::Dot) => print!("{}", dag.to_dot()),
        (_, GraphFormat::Text) => print!("{}", dag.to_text()),
    }
    Ok(exit::OK)
}
