#!/usr/bin/env python3
"""Where does `kcl lint` report errors and warnings, against upstream KCL's resolver?

For each sampled program, upstream (kcl-lib's `load_package` with `resolve_ast`, the resolver
behind `lint_path`, which gives positions) and `kcl lint --format json` are run on the same
files; a program agrees on errors when both report errors on the same set of lines (or both
none), and on warnings when both report the same (line, message) pairs.

Usage: KCL_ORACLE_PATH=~/.cache/kusion-rs/kcl-lib-0.12.4 \
  python3 scripts/kcl-lint-agreement.py KCL_BIN SHARED_DIR [N_GRAMMAR] [SEED]
Prints one line per disagreement and the rates; exit 0.
"""
import json, os, random, subprocess, sys, time

sys.path.insert(0, os.path.expanduser(os.environ.get("KCL_ORACLE_PATH", "~/.cache/kusion-rs/kcl-lib-0.12.4")))
import kcl_lib.api as api  # noqa: E402

kcl, shared = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
grammar = os.path.join(shared, "conformance/kcl-grammar")
modules = os.path.join(shared, "conformance/kcl-modules")
progs = []
for root, _, files in os.walk(grammar):
    if "main.k" in files:
        progs.append(("grammar", root, [os.path.join(root, "main.k")], []))
progs.sort()
random.Random(seed).shuffle(progs)
progs = progs[:n]
k8s = os.path.join(modules, "vendor/k8s_1.32.4")
for p in sorted(os.listdir(os.path.join(modules, "pkgs"))):
    d = os.path.join(modules, "pkgs", p)
    ks = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".k") and not f.endswith("_test.k"))
    if ks:
        progs.append(("modules", d, ks, [("k8s", k8s)]))

def upstream(files, ext, cwd):
    try:
        r = api.API().load_package(api.LoadPackageArgs(parse_args=api.ParseProgramArgs(
            paths=files,
            external_pkgs=[api.ExternalPkg(pkg_name=k, pkg_path=v) for k, v in ext]), resolve_ast=True))
    except Exception as e:  # upstream raises on some load failures
        return {"error": {-1}, "warn": set(), "exc": str(e)[:200]}
    errs, warns = set(), set()
    for e in list(r.parse_errors) + list(r.type_errors):
        m = e.messages[0] if e.messages else None
        if m is None or os.path.abspath(m.pos.filename or "") not in files:
            # errors in imported packages count at the package level only
            line = 0 if m is None else -2
        else:
            line = m.pos.line
        if e.level == "error":
            errs.add(line)
        else:
            warns.add((line, m.msg if m else ""))
    return {"error": errs, "warn": warns}

def ours(files, ext, cwd):
    # only upstream's rules: the others are this kcl's own
    cmd = [kcl, "lint", "--format", "json", "--disable", "unused-variable",
           "--disable", "shadowed-name", "--disable", "deprecated",
           "--disable", "unreachable"] + files
    for k, v in ext:
        cmd += ["-E", f"{k}={v}"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    try:
        doc = json.loads(p.stdout)
    except Exception:
        return {"error": {-1}, "warn": set(), "exc": p.stderr[:200]}
    errs, warns = set(), set()
    for f in doc["findings"]:
        line = f["line"] if os.path.abspath(f["file"] or "") in files else -2
        if f["level"] == "error":
            errs.add(line)
        else:
            warns.add((line, f["message"]))
    return {"error": errs, "warn": warns}

agree_e = agree_w = agree_verdict = 0
t_up = t_ours = 0.0
for kind, cwd, files, ext in progs:
    files = [os.path.abspath(f) for f in files]
    t = time.time(); u = upstream(files, ext, cwd); t_up += time.time() - t
    t = time.time(); o = ours(files, ext, cwd); t_ours += time.time() - t
    same_e = u["error"] == o["error"]
    agree_e += same_e
    agree_verdict += bool(u["error"]) == bool(o["error"])
    agree_w += u["warn"] == o["warn"]
    if not same_e:
        print("ERR ", kind, os.path.relpath(cwd, shared), "upstream", sorted(u["error"]), "ours", sorted(o["error"]))
    if u["warn"] != o["warn"]:
        print("WARN", kind, os.path.relpath(cwd, shared), "upstream", sorted(u["warn"]), "ours", sorted(o["warn"]))
total = len(progs)
print(f"programs {total}: errors on the same lines {agree_e}/{total} ({100*agree_e/total:.1f}%), "
      f"same verdict {agree_verdict}/{total} ({100*agree_verdict/total:.1f}%), "
      f"same warnings {agree_w}/{total} ({100*agree_w/total:.1f}%); "
      f"time upstream {t_up:.1f}s, ours {t_ours:.1f}s")
