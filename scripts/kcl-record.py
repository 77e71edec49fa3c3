#!/usr/bin/env python3
"""kcl-record.py PROBES IDX NAME [--first]: keep probe IDX of a kcl-probe.py file as the
regression case kcl/tests/differential/regressions/NAME, with upstream's outcome (kcl-lib 0.12.4
through scripts/kcl-oracle.py) as its expectation: `expected.stdout`, or `expected.error` (kind
and first message line) and `expected.stderr` (upstream's whole error output). `--first` keeps
only upstream's first diagnostic in `expected.stderr` (upstream's API prints a syntax error's
block twice, and later diagnostics are sometimes ones we do not aim to match).
"""
import os, re, shutil, subprocess, sys, tempfile

args = [a for a in sys.argv[1:] if not a.startswith('--')]
first_only = '--first' in sys.argv[1:]
if len(args) != 3:
    sys.exit(__doc__)
probes, idx, name = args[0], int(args[1]), args[2]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cache = os.environ.get('KUSION_CACHE', os.path.expanduser('~/.cache/kusion-rs'))
env = dict(os.environ, KCL_ORACLE_PATH=os.environ.get(
    'KCL_ORACLE_PATH', os.path.join(cache, 'kcl-lib-0.12.4')))

src = open(probes).read()
cases = [c.strip('\n') + '\n' for c in re.split(r'^#---.*$', src, flags=re.M) if c.strip()]
c = cases[idx]
extra = []
if c.startswith('#!args:'):
    head, c = c.split('\n', 1)
    extra = head[len('#!args:'):].split()
files = {'main.k': ''}
cur = 'main.k'
for line in c.splitlines(keepends=True):
    if line.startswith('#file: '):
        cur = line[7:].strip()
        files[cur] = ''
        continue
    files[cur] += line

dest = os.path.join(root, 'kcl/tests/differential/regressions', name)
shutil.rmtree(dest, ignore_errors=True)
for fn, body in files.items():
    os.makedirs(os.path.dirname(os.path.join(dest, fn)), exist_ok=True)
    open(os.path.join(dest, fn), 'w').write(body)
open(os.path.join(dest, 'args.txt'), 'w').write('\n'.join(['main.k'] + extra) + '\n')

# run in a scratch copy so the recorded folder holds only the program
run = tempfile.mkdtemp()
shutil.copytree(dest, run, dirs_exist_ok=True)
os.remove(os.path.join(run, 'args.txt'))
u = subprocess.run(['python3', os.path.join(root, 'scripts/kcl-oracle.py'), 'run', 'main.k'] + extra,
                   cwd=run, env=env, capture_output=True, text=True, timeout=60)
shutil.rmtree(run, ignore_errors=True)
if u.returncode == 0:
    open(os.path.join(dest, 'expected.stdout'), 'w').write(u.stdout)
    print(f'{name}: stdout ({len(u.stdout)} bytes)')
    sys.exit(0)

plain = re.sub(r'\x1b\[[0-9;]*[A-Za-z]', '', u.stderr).replace(run + '/', '${CWD}/').replace(run, '${CWD}')


def error_key(text):
    """kind and first message line, as kcl/tests/differential/oracle.rs::error_key reads them"""
    lines = [l.rstrip() for l in text.splitlines() if l.strip()]
    if not lines:
        return '', ''
    first = lines[0]
    m = re.match(r'^error\[\w+\]: (.*)$', first)
    if m:
        kind = m.group(1).strip()
    elif ' ' not in first and first.endswith('Error'):
        kind = first.strip()
    else:
        return '', first.strip()
    rest = lines[1:]
    seen_source = False
    for l in rest:
        t = l.lstrip()
        if t.startswith('-->'):
            seen_source = False
            continue
        if '|' in t:
            num = t.split('|', 1)[0].strip()
            if num and num.isdigit():
                seen_source = True
                continue
        if seen_source and t.startswith('|'):
            msg = t[1:].strip().lstrip('^').strip()
            if msg:
                return kind, msg
    for l in rest:
        t = l.strip()
        if not t.startswith('-->') and t != '|':
            return kind, t
    return kind, ''


kind, msg = error_key(plain)
open(os.path.join(dest, 'expected.error'), 'w').write(f'{kind}\n{msg}\n')
whole = plain
if first_only:
    # a diagnostic starts at a line at the margin naming an error kind
    out, started = [], False
    for l in plain.splitlines():
        at_margin = l and not l[0].isspace() and not l[0].isdigit() and not l.startswith(('note:', 'suggestion:', '|'))
        if at_margin and started:
            break
        started = started or at_margin
        out.append(l)
    whole = '\n'.join(out) + '\n'
open(os.path.join(dest, 'expected.stderr'), 'w').write(whole)
print(f'{name}: {kind}: {msg}')
