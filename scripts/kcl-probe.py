#!/usr/bin/env python3
"""kcl-probe.py FILE: hand-written KCL probes, each run by upstream (kcl-lib 0.12.4 through
scripts/kcl-oracle.py) and by our `kcl run`; prints each probe that differs and a count.

Probes in FILE are separated by lines starting `#---`. In a probe, a first line
`#!args: -D x=1 -S a` adds `kcl run` options, and a line `#file: pkg/a.k` starts another file
(the probe's first lines are main.k). Compared: exit status, stdout, and for errors the first
annotation message (the grammar runner's key mode). KCL_BIN names our binary
(default target/debug/kcl); probes are written under $TMPDIR/kcl-probe/. KCL_PROBE_ALL=1 prints
every probe with its whole error output (for comparing the errors after the first) and lists
the probes whose first errors agree but whose whole diagnostics differ.
"""
import sys, os, re, subprocess, shutil
src = open(sys.argv[1]).read()
cases = [c.strip('\n') + '\n' for c in re.split(r'^#---.*$', src, flags=re.M) if c.strip()]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ours = os.environ.get('KCL_BIN', os.path.join(root, 'target/debug/kcl'))
cache = os.environ.get('KUSION_CACHE', os.path.expanduser('~/.cache/kusion-rs'))
env = dict(os.environ, KCL_ORACLE_PATH=os.environ.get('KCL_ORACLE_PATH', os.path.join(cache, 'kcl-lib-0.12.4')))
def norm(s):
    s = re.sub(r'\x1b\[[0-9;]*m', '', s)
    return '\n'.join(l.rstrip() for l in s.splitlines() if l.strip() and l.strip() != '|')
def key(s):
    for l in re.sub(r'\x1b\[[0-9;]*m', '', s).splitlines():
        m = re.match(r'^\s*\|\s?(.*)$', l)
        if m:
            msg = re.sub(r'^\s*\^+\s*', '', m.group(1)).strip()
            if msg: return msg
    # a message with no position: our first line carries the `error[CODE]: ` header
    first = s.strip().splitlines()[0] if s.strip() else ''
    return re.sub(r'^error\[\w+\]: ', '', first)
def whole(s, d):
    # every diagnostic, as kcl/tests/differential/oracle.rs::whole_errors compares them
    s = re.sub(r'\x1b\[[0-9;]*[A-Za-z]', '', s).replace(d + '/', '${CWD}/')
    lines = [re.sub(r'^error\[\w+\]: ', '', l).rstrip() for l in s.splitlines() if l.strip() and l.strip() != '|']
    blocks = []
    for l in lines:
        starts = not l.startswith(' ') and not l.startswith(('suggestion:', 'note:')) and not l[:1].isdigit()
        if starts or not blocks: blocks.append([])
        blocks[-1].append(l)
    blocks = [b for b in blocks if not any('not found in the program' in l for l in b)]
    for k in range(1, len(blocks) // 2 + 1):
        if blocks[:k] == blocks[k:2 * k]:
            del blocks[:k]; break
    return [l for b in blocks for l in b]
import tempfile
base = os.path.join(tempfile.gettempdir(), 'kcl-probe'); shutil.rmtree(base, ignore_errors=True)
same = 0
differ, whole_differ = [], []
show_all = os.environ.get('KCL_PROBE_ALL') == '1'
limit = None if show_all else 1500
for i, c in enumerate(cases):
    d = f'{base}/c{i}'; os.makedirs(d)
    extra = []
    if c.startswith('#!args:'):
        first, c = c.split('\n', 1)
        extra = first[len('#!args:'):].split()
    files = {'main.k': ''}; cur = 'main.k'
    for line in c.splitlines(keepends=True):
        if line.startswith('#file: '):
            cur = line[7:].strip(); files[cur] = ''; continue
        files[cur] += line
    for fn, body in files.items():
        os.makedirs(os.path.dirname(f'{d}/{fn}'), exist_ok=True)
        open(f'{d}/{fn}', 'w').write(body)
    try:
        u = subprocess.run(['python3', os.path.join(root, 'scripts/kcl-oracle.py'), 'run', 'main.k'] + extra, cwd=d, env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        print(f'===== case {i} ({d}) ORACLE TIMEOUT'); print(c.rstrip()); continue
    o = subprocess.run([ours, 'run', 'main.k'] + extra, cwd=d, capture_output=True, text=True, timeout=60)
    ok = u.returncode == o.returncode and u.stdout == o.stdout and (u.returncode == 0 or key(u.stderr) == key(o.stderr))
    if ok: same += 1
    else: differ.append(i)
    if ok and u.returncode != 0 and whole(u.stderr, d) != whole(o.stderr, d): whole_differ.append(i)
    if ok and not show_all: continue
    print(f'===== case {i} ({d})' + (f' args: {" ".join(extra)}' if extra else '')); print(c.rstrip())
    print(f'--- upstream rc={u.returncode}'); print(u.stdout.rstrip()); print(norm(u.stderr)[:limit])
    print(f'--- ours rc={o.returncode}'); print(o.stdout.rstrip()); print(norm(o.stderr)[:limit])
print(f'{same}/{len(cases)} same')
if differ: print('differ:', ' '.join(map(str, differ)))
if show_all and whole_differ: print('same first error, other diagnostics differ:', ' '.join(map(str, whole_differ)))
