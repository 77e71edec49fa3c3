//! Parse throughput on a generated 100,000-line config file; prints MB/s.
//! Run: `cargo bench -p kusion-kcl --bench parse`.

use std::time::Instant;

fn main() {
    let lines: usize = std::env::var("KCL_BENCH_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let src = kusion_kcl::parser::generate::generate_config(lines);
    let mb = src.len() as f64 / 1e6;
    // Warm up once (also checks the generated file parses).
    if let Err(d) = kusion_kcl::parse_source("bench.k", &src) {
        eprintln!("{}", d.render());
        std::process::exit(1);
    }
    let mut best = f64::MAX;
    let runs = 5;
    for _ in 0..runs {
        let t = Instant::now();
        let m = kusion_kcl::parse_source("bench.k", &src).expect("parses");
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(&m);
        drop(m);
        best = best.min(secs);
    }
    let lex_t = Instant::now();
    let lexed = kusion_kcl::lexer::lex(&src, kusion_kcl::FileId(0), 0);
    let lex_secs = lex_t.elapsed().as_secs_f64();
    println!(
        "parse: {} lines, {:.2} MB, best of {runs}: {:.1} ms = {:.1} MB/s (lex only: {:.1} MB/s, {} tokens)",
        src.lines().count(),
        mb,
        best * 1e3,
        mb / best,
        mb / lex_secs,
        lexed.tokens.len()
    );
}
