//! Differential tests against upstream KCL (kcl-lib from PyPI, installed by
//! `scripts/setup.d/40-kcl-oracle.sh`; see `scripts/kcl-oracle.py`): programs nobody wrote by
//! hand run through upstream and through our `kcl run`; stdout must be byte-identical, and
//! failures must fail with the same error kind and first message line.
//!
//! * `recorded_differences_stay_fixed`: every difference found so far, kept under
//!   `differential/regressions/` with upstream's output as the expectation (no oracle needed).
//! * `bounded_sample_matches_upstream`: a few hundred generated and mutated programs from fixed
//!   seeds plus one fresh seed (printed); needs the oracle and fails loudly without it.
//! * `campaign` (ignored; `scripts/kcl-differential.sh N [SEED]`): a long run, with Konfig
//!   stacks when the shared corpus is there, shrinking and optionally recording every
//!   difference.
//!
//! kcl-lib 0.12.4, the release of the grammar suite and Konfig goldens, decides; with
//! `KCL_DIFF_ALSO_013=1` kcl-lib 0.13 runs beside it for information, counting the programs
//! whose outcome changed between the releases.

#[path = "differential/gen.rs"]
mod gen_;
#[path = "differential/konfig.rs"]
mod konfig;
#[path = "differential/mutate.rs"]
mod mutate;
#[path = "differential/oracle.rs"]
mod oracle;
#[path = "differential/regress.rs"]
mod regress;
#[path = "differential/shrink.rs"]
mod shrink;

use std::path::{Path, PathBuf};

use gen_::{Gen, Rng};
use oracle::{Diff, Program, Upstream, Verdict, compare, run_ours, whole_errors};

#[test]
fn recorded_differences_stay_fixed() {
    let cases = regress::load_all();
    assert!(
        !cases.is_empty(),
        "no cases in {}",
        regress::regressions_dir().display()
    );
    let mut failures = Vec::new();
    for c in &cases {
        let dir = tempfile::tempdir().unwrap();
        c.program.write(dir.path());
        let ours = run_ours(&c.program, dir.path()).expect("kcl finished");
        if let Err(e) = regress::check(c, &ours, dir.path()) {
            failures.push(format!("--- {}\n{e}", c.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} recorded differences are back:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Counters of one run.
#[derive(Default, Debug)]
struct Tally {
    programs: usize,
    agreed_ok: usize,
    agreed_err: usize,
    version_dependent: usize,
    oracle_failed: usize,
    differences: Vec<(String, Diff, Program)>,
    /// How often upstream failed with each error (kind and first line): how valid the
    /// generated programs are.
    upstream_errors: std::collections::BTreeMap<(String, String), usize>,
}

impl Tally {
    /// One line of counts, as both the sample and the campaign print them.
    fn summary(&self) -> String {
        format!(
            "{} programs, upstream ok {} / error {}, version-dependent {}, oracle failures {}, \
             differences {}",
            self.programs,
            self.agreed_ok,
            self.agreed_err,
            self.version_dependent,
            self.oracle_failed,
            self.differences.len()
        )
    }
}

/// Run `p` through upstream and ours; record a difference under `label`.
fn check_one(up: &mut Upstream, label: &str, p: &Program, t: &mut Tally) {
    t.programs += 1;
    let dir = tempfile::tempdir().unwrap();
    p.write(dir.path());
    let before = up.version_dependent;
    let verdict = up.run(p, dir.path());
    t.version_dependent += up.version_dependent - before;
    // KCL_DIFF_DUMP=DIR keeps every program with upstream's outcome (to tune generators)
    if let (Some(d), Verdict::Agreed(u)) = (std::env::var_os("KCL_DIFF_DUMP"), &verdict) {
        let f = PathBuf::from(d).join(format!("{}.txt", label.replace([' ', '/'], "-")));
        let _ = std::fs::create_dir_all(f.parent().unwrap());
        let _ = std::fs::write(
            f,
            format!(
                "{}--- exit {}
{}{}",
                p.render(),
                u.code,
                u.stdout,
                u.stderr
            ),
        );
    }
    let Verdict::Agreed(u) = verdict else {
        t.oracle_failed += 1;
        return;
    };
    if u.ok() {
        t.agreed_ok += 1;
    } else {
        t.agreed_err += 1;
        let (k, m) = u.error_key(dir.path());
        let m: String = m.chars().take(70).collect();
        *t.upstream_errors.entry((k, m)).or_default() += 1;
    }
    let Some(ours) = run_ours(p, dir.path()) else {
        t.differences.push((
            label.to_string(),
            Diff::Status {
                upstream_ok: u.ok(),
            },
            p.clone(),
        ));
        return;
    };
    if let Some(d) = compare(&u, &ours, dir.path()) {
        t.differences.push((label.to_string(), d, p.clone()));
    }
}

/// Shrink every difference and describe it (and record it when `record`).
fn report(up: &mut Upstream, t: &Tally, budget: usize, record: Option<&str>) -> String {
    let mut out = String::new();
    for (k, (label, d, p)) in t.differences.iter().enumerate() {
        let small = shrink::shrink(up, p, d, budget);
        let dir = tempfile::tempdir().unwrap();
        small.write(dir.path());
        let u = match up.run(&small, dir.path()) {
            Verdict::Agreed(u) => u,
            _ => continue,
        };
        let ours = run_ours(&small, dir.path());
        out.push_str(&format!(
            "=== difference {k} ({label}): {d:?}\n{}--- upstream (exit {}):\n{}{}--- ours:\n{}\n",
            small.render(),
            u.code,
            u.stdout,
            if u.ok() {
                String::new()
            } else if *d == Diff::Whole {
                let w = whole_errors(&u.stderr, dir.path()).join("\n");
                format!("{:?}\n{w}\n", u.error_key(dir.path()))
            } else {
                format!("{:?}\n", u.error_key(dir.path()))
            },
            match &ours {
                Some(o) if o.ok() => o.stdout.clone(),
                Some(o) => format!(
                    "exit {}: {:?}\n{}",
                    o.code,
                    o.error_key(dir.path()),
                    o.stderr
                ),
                None => "did not finish\n".into(),
            }
        ));
        if let Some(prefix) = record {
            regress::record(
                &format!("{prefix}-{}", label.replace([' ', '/'], "-")),
                &small,
                &u,
                dir.path(),
            );
        }
    }
    out
}

/// Sources for mutation: the repository's own KCL files (and the shared grammar suite's
/// `main.k` files when `shared` is given), each named by its path below its root.
fn mutation_sources(shared: Option<&Path>) -> Vec<(String, String)> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut roots = vec![here];
    if let Some(s) = shared {
        roots.push(s.join("conformance/kcl-grammar"));
    }
    let mut out = Vec::new();
    for root in roots {
        let mut files = Vec::new();
        walk_k(&root, &mut files);
        for f in files {
            let name = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
            if let Ok(text) = std::fs::read_to_string(&f)
                && text.len() < 4000
            {
                out.push((name, text));
            }
        }
    }
    out.sort();
    out
}

/// The source a mutant seed draws: the one whose name hashes highest with the seed
/// (rendezvous hashing), so adding a file (a new regression case) changes the draw of only
/// the few seeds the new file wins, not of every seed after it in a sorted list.
fn draw_source(sources: &[(String, String)], seed: u64) -> &str {
    let score = |name: &str| {
        let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for b in name.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Rng::new(h).next()
    };
    sources
        .iter()
        .max_by_key(|(name, _)| score(name))
        .map_or("", |(_, text)| text.as_str())
}

fn walk_k(d: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(d) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk_k(&p, out);
        } else if p.extension().is_some_and(|x| x == "k") {
            out.push(p);
        }
    }
}

fn run_generated(up: &mut Upstream, seeds: impl Iterator<Item = u64>, t: &mut Tally) {
    for s in seeds {
        let p = Gen::new(s).program();
        check_one(up, &format!("gen seed {s}"), &p, t);
    }
}

fn run_mutants(
    up: &mut Upstream,
    sources: &[(String, String)],
    seeds: impl Iterator<Item = u64>,
    t: &mut Tally,
) {
    if sources.is_empty() {
        return;
    }
    for s in seeds {
        let mut rng = Rng::new(s ^ 0x5eed);
        let src = draw_source(sources, s);
        let p = Program::single(&mutate::mutate(src, &mut rng));
        check_one(up, &format!("mutant seed {s}"), &p, t);
    }
}

fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        % 1_000_000_007
}

#[test]
fn bounded_sample_matches_upstream() {
    let mut up = Upstream::start();
    let fresh = fresh_seed();
    eprintln!(
        "differential sample: fixed seeds 1..=200 and mutants 1..=100; fresh seed {fresh} \
         (reproduce: scripts/kcl-differential.sh 60 {fresh})"
    );
    let sources = mutation_sources(None);
    let mut fixed = Tally::default();
    run_generated(&mut up, 1..=200, &mut fixed);
    let generated = (fixed.programs, fixed.agreed_ok);
    run_mutants(&mut up, &sources, 1..=100, &mut fixed);
    let mut new = Tally::default();
    run_generated(&mut up, fresh..fresh + 40, &mut new);
    run_mutants(&mut up, &sources, fresh..fresh + 20, &mut new);
    for (kind, t) in [
        ("fixed seeds", &fixed),
        (&*format!("fresh seed {fresh}"), &new),
    ] {
        eprintln!("differential sample, {kind}: {}", t.summary());
    }
    // errors are compared too (kind and message), but a generator making mostly errors
    // would compare little output
    assert!(
        generated.1 * 3 >= generated.0,
        "the generator should make many valid programs: {} of {} ran",
        generated.1,
        generated.0
    );
    // what a fresh seed finds is reported, not failed: the test command must not turn red on
    // a commit that did not cause the difference (record it with scripts/kcl-differential.sh)
    if !new.differences.is_empty() {
        let r = report(&mut up, &new, 10, None);
        eprintln!(
            "differential sample: fresh seed {fresh} found {} differences (not failed; \
             reproduce: scripts/kcl-differential.sh 60 {fresh}):\n{r}",
            new.differences.len()
        );
    }
    if !fixed.differences.is_empty() {
        let r = report(&mut up, &fixed, 40, None);
        panic!(
            "{} programs differ from upstream:\n{r}",
            fixed.differences.len()
        );
    }
}

/// `scripts/kcl-differential.sh N [SEED]`: KCL_DIFF_N programs of each kind from
/// KCL_DIFF_SEED; KCL_DIFF_KINDS (`gen,mutate,konfig`); KCL_DIFF_RECORD=1 records every
/// shrunk difference as a regression; KCL_DIFF_REPORT names the report file.
#[test]
#[ignore]
fn campaign() {
    let n: u64 = std::env::var("KCL_DIFF_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let seed: u64 = std::env::var("KCL_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(fresh_seed);
    let kinds = std::env::var("KCL_DIFF_KINDS").unwrap_or_else(|_| "gen,mutate,konfig".into());
    let shared = std::env::var_os("KUSION_SHARED")
        .map(PathBuf::from)
        .or_else(|| {
            let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
            p.is_dir().then_some(p)
        });
    let budget: usize = std::env::var("KCL_DIFF_SHRINK_BUDGET")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let record = std::env::var("KCL_DIFF_RECORD").is_ok_and(|v| v == "1");
    eprintln!("campaign: {n} programs per kind ({kinds}) from seed {seed}");
    let mut reports = String::new();
    let mut totals = Vec::new();
    let mut calls = 0;
    if kinds.contains("gen") || kinds.contains("mutate") {
        let mut up = Upstream::start();
        if kinds.contains("gen") {
            let mut t = Tally::default();
            run_generated(&mut up, seed..seed + n, &mut t);
            reports.push_str(&report(&mut up, &t, budget, record.then_some("gen")));
            totals.push(("generated", t));
        }
        if kinds.contains("mutate") {
            let mut t = Tally::default();
            let sources = mutation_sources(shared.as_deref());
            run_mutants(&mut up, &sources, seed..seed + n, &mut t);
            reports.push_str(&report(&mut up, &t, budget, record.then_some("mutant")));
            totals.push(("mutants", t));
        }
        calls += up.calls();
    }
    if kinds.contains("konfig") {
        match &shared {
            Some(s) if s.join("conformance/konfig/models").is_dir() => {
                let mut up = Upstream::start();
                let mut t = Tally::default();
                konfig::run_stacks(&mut up, &s.join("conformance/konfig"), seed, n, &mut t);
                reports.push_str(&report(&mut up, &t, budget, record.then_some("konfig")));
                totals.push(("konfig stacks", t));
                calls += up.calls();
            }
            _ => eprintln!(
                "campaign: no shared Konfig corpus (KUSION_SHARED); konfig stacks skipped"
            ),
        }
    }
    eprintln!("campaign: {} upstream runs in all", calls);
    let path = std::env::var("KCL_DIFF_REPORT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join(format!("kcl-differential-{seed}.txt")));
    std::fs::write(&path, &reports).unwrap();
    let mut ndiff = 0;
    for (k, t) in &totals {
        eprintln!("campaign {k}: {}", t.summary());
        ndiff += t.differences.len();
        let mut errs: Vec<_> = t.upstream_errors.iter().collect();
        errs.sort_by(|a, b| b.1.cmp(a.1));
        for ((k, m), n) in errs.iter().take(8) {
            eprintln!("    upstream error x{n}: {k}: {m}");
        }
    }
    eprintln!("campaign: report in {}", path.display());
    assert_eq!(ndiff, 0, "{ndiff} differences (see {})", path.display());
}

/// `scripts/kcl-differential.sh record DIR [NAME]`: keep the program in DIR (its files and an
/// `args.txt`) as regression NAME with upstream's outcome, once the upstream releases agree;
/// without NAME every subfolder of DIR is a program, named after the folder.
#[test]
#[ignore]
fn record() {
    let src = PathBuf::from(std::env::var_os("KCL_DIFF_RECORD_DIR").expect("KCL_DIFF_RECORD_DIR"));
    let cases: Vec<(String, PathBuf)> = match std::env::var("KCL_DIFF_RECORD_NAME") {
        Ok(n) if !n.is_empty() => vec![(n, src)],
        _ => {
            let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(&src)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.join("args.txt").is_file())
                .map(|p| (p.file_name().unwrap().to_string_lossy().to_string(), p))
                .collect();
            v.sort();
            v
        }
    };
    let mut up = Upstream::start();
    let mut failed = Vec::new();
    for (name, dir_in) in cases {
        let args: Vec<String> = std::fs::read_to_string(dir_in.join("args.txt"))
            .expect("args.txt")
            .lines()
            .map(String::from)
            .collect();
        let mut files = Vec::new();
        let mut paths = Vec::new();
        walk_all(&dir_in, &mut paths);
        for p in paths {
            let rel = p
                .strip_prefix(&dir_in)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if ![
                "args.txt",
                "expected.stdout",
                "expected.error",
                "expected.stderr",
            ]
            .contains(&rel.as_str())
            {
                files.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
        files.sort();
        let p = Program { files, args };
        let dir = tempfile::tempdir().unwrap();
        p.write(dir.path());
        match up.run(&p, dir.path()) {
            Verdict::Agreed(u) => {
                regress::record(&name, &p, &u, dir.path());
                let ours = run_ours(&p, dir.path()).unwrap();
                let same = compare(&u, &ours, dir.path()).is_none();
                eprintln!(
                    "recorded {name}: upstream exit {}; ours {}",
                    u.code,
                    if same { "agrees" } else { "DIFFERS" }
                );
            }
            Verdict::Failed => failed.push(format!("{name}: upstream crashed or timed out")),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

fn walk_all(d: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk_all(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// `KCL_DIFF_SEED=S cargo test -p kusion-kcl --test differential show -- --ignored --nocapture`:
/// prints the generated program of seed S (and the mutant of that seed), to read what a
/// campaign ran.
#[test]
#[ignore]
fn show() {
    let seed: u64 = std::env::var("KCL_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    println!(
        "# generated, seed {seed}\n{}",
        Gen::new(seed).program().render()
    );
    let sources = mutation_sources(None);
    let mut rng = Rng::new(seed ^ 0x5eed);
    let m = mutate::mutate(draw_source(&sources, seed), &mut rng);
    println!("# mutant, seed {seed}\n{m}");
}
