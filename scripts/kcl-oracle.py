#!/usr/bin/env python3
"""Upstream KCL (kcl-lib from PyPI, see scripts/setup.d/40-kcl-oracle.sh) behind the command
line of our `kcl run`: the differential oracle.

    python3 scripts/kcl-oracle.py run FILE... [-D k=v] [-E name=path] [-Y settings.yaml]
        [-O path=value] [-S path] [-k] [-n] [-H] [-r] [--format yaml|json]
    python3 scripts/kcl-oracle.py serve

`run` prints upstream's YAML (or JSON) on stdout; on an error it prints upstream's message
(colours removed) on stderr and exits 1.  `serve` reads one JSON request per line on stdin,
{"argv": ["run", ...], "cwd": DIR}, and answers one JSON line per request,
{"code": N, "stdout": "...", "stderr": "..."}: the harness keeps one interpreter for a whole
campaign instead of paying Python's and kcl-lib's start-up per program.

Paths follow `kcl run`: files and -E paths are relative to the current directory, files listed
in a settings file are relative to that file, and `${name:KCL_MOD}` paths are passed through
untouched (upstream resolves them against the -E package of that name).
"""
import json
import os
import re
import resource
import sys

# upstream's parser loops and grows without bound on some broken programs (`x = [if True:`
# at the end of a file): cap the address space so such a run fails, instead of swapping the
# machine (KCL_ORACLE_MEMORY_MB, default 4096)
_cap = int(os.environ.get("KCL_ORACLE_MEMORY_MB", "4096")) << 20
resource.setrlimit(resource.RLIMIT_AS, (_cap, _cap))

# KCL_ORACLE_PATH: a `pip install --target` folder holding another kcl-lib release (the Konfig
# goldens come from 0.12.4; 0.13 rejects Konfig's cross-module `__META_*` references)
if os.environ.get("KCL_ORACLE_PATH"):
    sys.path.insert(0, os.environ["KCL_ORACLE_PATH"])

USAGE = ("usage: kcl-oracle.py run FILE... [-D k=v] [-E name=path] [-Y file] [-O p=v] [-S p]"
         " [-k] [-n] [-H] [-r] [--format yaml|json] | serve\n")
VALUE_FLAGS = {"-D": "D", "--argument": "D", "-E": "E", "--external": "E", "-Y": "Y",
               "--setting": "Y", "-O": "O", "--overrides": "O", "-S": "S",
               "--path_selector": "S", "--format": "format", "-o": "o", "--output": "o"}
BOOL_FLAGS = {"-k": "sort_keys", "--sort_keys": "sort_keys", "-n": "disable_none",
              "--disable_none": "disable_none", "-H": "show_hidden",
              "--show_hidden": "show_hidden", "-r": "strict_range_check",
              "--strict_range_check": "strict_range_check"}


class Usage(Exception):
    pass


def kcl_path(p, base):
    """A file argument as upstream's CLI passes it on: `${...}` forms untouched."""
    if os.path.isabs(p) or p.startswith("${"):
        return p
    return os.path.normpath(os.path.join(base, p))


def parse_args(argv, cwd):
    if not argv or argv[0] != "run":
        raise Usage(USAGE)
    o = {"files": [], "D": [], "E": [], "O": [], "S": [], "format": "yaml", "o": None}
    for b in BOOL_FLAGS.values():
        o[b] = False
    i = 1
    while i < len(argv):
        a = argv[i]
        if "=" in a and a.startswith("--") and a.split("=", 1)[0] in VALUE_FLAGS:
            a, v = a.split("=", 1)
            i += 1
        elif a in VALUE_FLAGS:
            if i + 1 >= len(argv):
                raise Usage("missing value for %s\n" % a)
            v = argv[i + 1]
            i += 2
        elif a in BOOL_FLAGS:
            o[BOOL_FLAGS[a]] = True
            i += 1
            continue
        elif a.startswith("-") and a != "-":
            raise Usage("unknown flag %s\n" % a)
        else:
            o["files"].append(kcl_path(a, cwd))
            i += 1
            continue
        key = VALUE_FLAGS[a]
        if key == "Y":
            settings(kcl_path(v, cwd), o)
        elif key == "E":
            k, _, p = v.partition("=")
            o["E"].append((k, kcl_path(p, cwd)))
        elif key == "D":
            if "=" not in v or v.startswith("="):
                raise Usage("Invalid value for top level arguments: '%s'\n" % v)
            k, _, val = v.partition("=")
            o["D"].append((k, val))
        elif key in ("O", "S"):
            o[key].append(v)
        else:
            o[key] = v
    return o


def settings(path, o):
    """`-Y`: kcl_cli_configs and kcl_options of a settings file, the way `kcl run` reads them."""
    import yaml
    with open(path) as f:
        y = yaml.safe_load(f) or {}
    base = os.path.dirname(path)
    c = y.get("kcl_cli_configs") or {}
    for key in ("files", "file"):
        for f in c.get(key) or []:
            o["files"].append(kcl_path(f, base))
    for b in ("sort_keys", "disable_none", "show_hidden", "strict_range_check"):
        if c.get(b):
            o[b] = True
    o["O"].extend(c.get("overrides") or [])
    o["S"].extend(c.get("path_selector") or [])
    for it in y.get("kcl_options") or []:
        v = it.get("value")
        o["D"].append((it["key"], v if isinstance(v, str) else json.dumps(v)))


def execute(argv, cwd):
    """(exit code, stdout, stderr) of `kcl run argv...` run by upstream in `cwd`."""
    try:
        o = parse_args(argv, cwd)
    except Usage as e:
        return 2, "", str(e)
    except (OSError, ValueError) as e:
        return 1, "", "%s\n" % e
    import kcl_lib.api as api
    # file-writing builtins (`yaml.dump_to_file`) write relative to the process's directory
    os.chdir(cwd)
    ea = api.ExecProgramArgs(
        # no work_dir: the command line passes none (`file.workdir()` is empty there)
        k_filename_list=o["files"],
        args=[api.Argument(name=k, value=v) for k, v in o["D"]],
        external_pkgs=[api.ExternalPkg(pkg_name=k, pkg_path=p) for k, p in o["E"]],
        overrides=o["O"],
        path_selector=o["S"],
        sort_keys=o["sort_keys"],
        disable_none=o["disable_none"],
        show_hidden=o["show_hidden"],
        strict_range_check=o["strict_range_check"],
    )
    # the native library writes a panic of its own to file descriptor 2 and may still answer
    # "ok, no output": keep that text, so a caller can tell a crash from an outcome
    import tempfile
    native = tempfile.TemporaryFile()
    saved = os.dup(2)
    os.dup2(native.fileno(), 2)
    try:
        r = api.API().exec_program(ea)
        err = r.err_message
    except Exception as e:  # kcl_lib raises on parse and compile errors
        err = str(e) or repr(e)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    native.seek(0)
    crash = native.read().decode("utf-8", "replace")
    native.close()
    # `print` output: the command line writes it before the result (or the error)
    log = getattr(r, "log_message", "") if "r" in locals() else ""
    if err:
        return 1, log, re.sub(r"\x1b\[[0-9;]*m", "", err).rstrip("\n") + "\n"
    out = r.json_result if o["format"] == "json" else r.yaml_result
    # the API's result lacks the last line break (a `|+` block keeps the ones before it),
    # which the command line prints after it
    if out:
        out += "\n"
    if o["o"]:
        with open(kcl_path(o["o"], cwd), "w") as f:
            f.write(out)
        out = ""
    return 0, log + out, crash if "panicked at" in crash else ""


def serve():
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            code, out, err = execute(req["argv"], req.get("cwd") or os.getcwd())
        except Exception as e:  # never let one request end the server
            code, out, err = 1, "", "oracle wrapper: %r\n" % e
        sys.stdout.write(json.dumps({"code": code, "stdout": out, "stderr": err}) + "\n")
        sys.stdout.flush()
    return 0


def main(argv):
    if argv[:1] == ["serve"]:
        return serve()
    code, out, err = execute(argv, os.getcwd())
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
