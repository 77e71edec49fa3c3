#!/usr/bin/env python3
"""Upstream's figures for the language-server workload of `cargo bench -p kusion-kcl --bench lsp`.

No registry ships upstream's `kcl-language-server`, so this measures the kcl-lib API call that
backs it: `load_package` with `resolve_ast` (parse, resolve imports, type-check one compile
unit; upstream's server runs this on every change of the unit) on the Konfig corpus
(`$KUSION_SHARED/conformance/konfig`, default `../shared/conformance/konfig`):

- initial analysis: every stack (its `command.txt` files and `-E` packages) and every package
  folder of `models/` and `vendor/k8s/`, each loaded once;
- after a one-character edit of a stack's `main.k`: the edited text passed as a source;
- peak resident memory of the process.

Usage: python3 scripts/lsp-upstream-bench.py [ROUNDS]
"""

import os
import resource
import shlex
import sys
import time
from pathlib import Path

import kcl_lib.api as api
from kcl_lib.api import spec_pb2 as spec

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KUSION_SHARED", ROOT.parent / "shared"))
KONFIG = (SHARED / "conformance" / "konfig").resolve()


def stacks():
    """(files, externals) of every stack, from its command.txt."""
    out = []
    for cmd in sorted(KONFIG.glob("examples/**/command.txt")):
        words = shlex.split(cmd.read_text().strip())
        files, ext = [], []
        i = 0
        while i < len(words):
            w = words[i]
            if w == "-E":
                name, _, path = words[i + 1].partition("=")
                ext.append((name, str((KONFIG / path).resolve())))
                i += 2
                continue
            if w == "-D":
                i += 2
                continue
            if w.endswith(".k"):
                files.append(w)
            i += 1
        ext_map = dict(ext)
        resolved = []
        for f in files:
            if f.startswith("${konfig:KCL_MOD}"):
                f = f.replace("${konfig:KCL_MOD}", ext_map.get("konfig", str(KONFIG)))
            resolved.append(str((KONFIG / f).resolve()))
        out.append((resolved, ext))
    return out


def folders():
    """Package folders of models/ and vendor/k8s/ (folders holding .k files)."""
    out = set()
    for base in ("models", "vendor/k8s"):
        for f in (KONFIG / base).rglob("*.k"):
            if not f.name.endswith("_test.k"):
                out.add(f.parent)
    return sorted(out)


EXT = [("konfig", str(KONFIG)), ("k8s", str(KONFIG / "vendor" / "k8s"))]


def load(lib, paths, ext, sources=None):
    args = spec.LoadPackageArgs(
        parse_args=spec.ParseProgramArgs(
            paths=paths,
            sources=sources or [],
            external_pkgs=[spec.ExternalPkg(pkg_name=n, pkg_path=p) for n, p in ext],
        ),
        resolve_ast=True,
        load_builtin=False,
        with_ast_index=True,
    )
    return lib.load_package(args)


def pct(v, p):
    v = sorted(v)
    return v[round((len(v) - 1) * p)]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    if not KONFIG.is_dir():
        sys.exit(f"no Konfig corpus at {KONFIG} (set KUSION_SHARED)")
    lib = api.API()
    # one-character edits of a stack's main.k, as the server re-resolves its unit
    main = KONFIG / "examples/appops/guestbook/dev/main.k"
    files = [
        str(KONFIG / "examples/appops/guestbook/base/base.k"),
        str(main),
        str(KONFIG / "models/kube/render/render.k"),
    ]
    text = main.read_text()
    times = []
    for i in range(rounds):
        edited = text.replace("image = ", "imagex = ", 1) if i % 2 == 0 else text
        srcs = [Path(f).read_text() if f != str(main) else edited for f in files]
        t = time.perf_counter()
        try:
            load(lib, files, EXT, sources=srcs)
        except Exception:
            pass
        times.append((time.perf_counter() - t) * 1e3)
    print(
        f"upstream re-analysis of {main.relative_to(KONFIG)} after a one-character edit "
        f"(load_package + resolve): p50 {pct(times, 0.5):.1f} ms, p95 {pct(times, 0.95):.1f} ms"
    )
    if os.environ.get("SKIP_INITIAL") != "1":
        st = stacks()
        fs = folders()
        t = time.perf_counter()
        errors = 0
        for files, ext in st:
            try:
                load(lib, files, ext)
            except Exception:  # a unit upstream cannot load still counts its time
                errors += 1
        t_stacks = time.perf_counter() - t
        for d in fs:
            try:
                load(lib, [str(d)], EXT)
            except Exception:
                errors += 1
        initial = time.perf_counter() - t
        print(
            f"upstream kcl-lib: initial analysis of {len(st)} stacks + {len(fs)} package folders: {initial * 1e3:.0f} ms "
            f"(the stacks {t_stacks * 1e3:.0f} ms; {errors} failed to load)"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"upstream peak resident memory (python + kcl-lib): {rss:.0f} MiB")


if __name__ == "__main__":
    main()
