//! Parse throughput on a generated 100,000-line config file; prints MB/s.
//! Run: `cargo bench -p kusion-kcl --bench parse` (KCL_BENCH_LINES changes the size).
//!
//! Two figures are printed: wall-clock (best of N runs) and on-CPU time of the parsing thread
//! (from /proc/thread-self/schedstat, Linux), which stays meaningful on a machine shared with
//! other jobs.

use std::time::Instant;

// Same allocator as the `kcl` binary, so the figure is what `kcl` users get.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Nanoseconds this thread has spent on a CPU, if the kernel exposes it.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let lines: usize = std::env::var("KCL_BENCH_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let src = kusion_kcl::generate_config(lines);
    let mb = src.len() as f64 / 1e6;
    // Warm up once (also checks the generated file parses).
    if let Err(d) = kusion_kcl::parse_source("bench.k", &src) {
        eprintln!("{}", d.render());
        std::process::exit(1);
    }
    let runs = 10;
    let mut best_wall = f64::MAX;
    let mut best_cpu = f64::MAX;
    for _ in 0..runs {
        let c0 = thread_cpu_ns();
        let t = Instant::now();
        let m = kusion_kcl::parse_source("bench.k", &src).expect("parses");
        let wall = t.elapsed().as_secs_f64();
        let c1 = thread_cpu_ns();
        std::hint::black_box(&m);
        drop(m);
        best_wall = best_wall.min(wall);
        if let (Some(a), Some(b)) = (c0, c1) {
            best_cpu = best_cpu.min((b - a) as f64 / 1e9);
        }
    }
    let c0 = thread_cpu_ns();
    let lexed = kusion_kcl::lex(&src, kusion_kcl::FileId(0), 0);
    let lex_cpu = match (c0, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => f64::NAN,
    };
    println!(
        "parse: {} lines, {:.2} MB, best of {runs}: wall {:.1} ms = {:.1} MB/s; on-CPU {:.1} ms = {:.1} MB/s (lex only on-CPU: {:.1} MB/s, {} tokens)",
        src.lines().count(),
        mb,
        best_wall * 1e3,
        mb / best_wall,
        best_cpu * 1e3,
        mb / best_cpu,
        mb / lex_cpu,
        lexed.tokens.len()
    );
}
