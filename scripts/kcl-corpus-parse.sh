#!/usr/bin/env bash
# Parses every .k file of a KCL grammar suite (layout of kcl-lang/kcl tests/grammar) with
# `kcl parse` and checks it against the cases' goldens:
#   - a file must parse unless its case expects a syntax error (its stderr.golden starts with
#     an E1001 InvalidSyntax/IllegalParameterError header, or is a plain-text "illegal
#     expression for assignment" error, which upstream reports while parsing);
#   - for a syntax-error case, the first message we report for main.k must equal the golden's
#     key text (the first annotation message).
# Usage: scripts/kcl-corpus-parse.sh KCL_BINARY SUITE_DIR
# Output: one line per mismatch, then "parse: A/B files parse; syntax-error cases: C/D first
# message matches".
set -euo pipefail
kcl="$1"
suite="$(cd "$2" && pwd)"
summary="$(mktemp)"
trap 'rm -f "$summary"' EXIT
"$kcl" parse --summary "$suite" >"$summary" 2>/dev/null || true
python3 - "$suite" "$summary" <<'PY'
import os, re, sys
suite, summary = sys.argv[1], sys.argv[2]
head = re.compile(r"^(error|warning)(\[[A-Za-z0-9]+\])?:")

def key_text(path):
    lines = [l for l in open(path, encoding="utf-8").read().splitlines() if l.strip()]
    if not lines:
        return "", ""
    if head.match(lines[0]):
        for l in lines[1:]:
            m = re.match(r"^\s*\|\s?(.*)$", l)
            if m:
                msg = re.sub(r"^\s*\^+\s*", "", m.group(1)).strip()
                if msg:
                    return lines[0], msg
        return lines[0], head.sub("", lines[0]).strip()
    return lines[0], lines[0].strip()

def case_dir(path):
    d = os.path.dirname(path)
    while d.startswith(suite):
        if os.path.isfile(os.path.join(d, "main.k")):
            return d
        d = os.path.dirname(d)
    return None

results = {}
for line in open(summary, encoding="utf-8"):
    line = line.rstrip("\n")
    if line.startswith("OK "):
        results[line[3:]] = None
    elif line.startswith("ERR "):
        path, _, msg = line[4:].partition(" :: ")
        results[path] = msg

expect_ok = ok = 0
syn_cases = syn_match = 0
for path in sorted(results):
    case = case_dir(path)
    golden = os.path.join(case, "stderr.golden") if case else ""
    syntax_case = False
    key = ""
    if golden and os.path.isfile(golden):
        first, key = key_text(golden)
        syntax_case = ("E1001]: InvalidSyntax" in first or "E1001]: IllegalParameterError" in first
                       or "is an illegal expression for assignment" in first)
    is_main = case and os.path.basename(path) == "main.k" and os.path.dirname(path) == case
    if syntax_case and is_main:
        syn_cases += 1
        got = results[path]
        if got is not None and got == key:
            syn_match += 1
        else:
            print(f"MISMATCH {os.path.relpath(path, suite)}: expected {key!r}, got {got!r}")
        continue
    expect_ok += 1
    if results[path] is None:
        ok += 1
    else:
        print(f"PARSE-FAIL {os.path.relpath(path, suite)}: {results[path]}")
print(f"parse: {ok}/{expect_ok} files parse; syntax-error cases: {syn_match}/{syn_cases} first message matches")
PY
