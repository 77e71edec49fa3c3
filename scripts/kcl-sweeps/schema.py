#!/usr/bin/env python3
"""Schema features: deprecated attributes, optional and required attributes with None or
Undefined, schema parameters, string attribute names, defaults reading other attributes,
instances(), factories (a lambda building a schema), and instances made in several ways.

Usage: schema.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
attr_kinds = [
    'name: str = "n"', 'name?: str', 'name: str', 'name?: str = None', 'name: str = None',
    '@deprecated\n    old: int = 1', '@deprecated(version="1.2", reason="use x", strict=False)\n    old?: int',
    '@deprecated(strict=True)\n    old?: int', '@deprecated(version="v2")\n    old: int = 2',
    '"a-b": int = 1', '"a-b"?: str', 'x: int = 2', 'x?: int', 'y: int = x * 2 if x else 0',
    'y?: [int] = [x]', 'z: {str:int} = {k = 1}', 'z?: {str:int}', 'w: str = name + "!" if name else "?"',
    '_p: int = 3', 'l: [str] = [name]', 'x: int = p0', 'name: str = p1',
]
values = {'name': ['"v"', 'None', 'Undefined', '1'], 'old': ['3', 'None', '"s"'], '"a-b"': ['2', '"q"', 'None'],
          'x': ['5', 'None', '0', '"1"'], 'y': ['[1]', 'None', '7'], 'z': ['{j = 2}', 'None'], 'w': ['"ww"', 'None'],
          '_p': ['4'], 'l': ['["a"]', 'None', '[]']}
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    attrs = r.sample(attr_kinds, r.randint(2, 5))
    names = []
    for a in attrs:
        last = a.split('\n')[-1].strip()
        nm = last.split(':')[0].rstrip('?')
        if nm not in names:
            names.append(nm)
    params = ''
    if any('p0' in a or 'p1' in a for a in attrs):
        params = r.choice(['(p0, p1="d")', '(p0=1, p1="d")', '(p0: int, p1: str = "d")', '(p0, p1)'])
    body = '\n'.join('    ' + a for a in attrs)
    src = f'schema S{params}:\n{body}\n'
    if r.random() < 0.3:
        src += '    check:\n        ' + r.choice(['x > 0 if x', 'name', 'len(l) > 0 if l', 'old != 3']) + '\n'
    insts = []
    for i in range(r.randint(1, 3)):
        kv = []
        for nm in r.sample(names, r.randint(0, min(2, len(names)))):
            if nm in values:
                kv.append(f'{nm} = {r.choice(values[nm])}' if not nm.startswith('"') else f'{nm}: {r.choice(values[nm])}')
        args = ''
        if params:
            args = r.choice(['(1)', '(1, "e")', '(p0=2)', '()', '(1, p1="k")', '("s")'])
        form = r.choice(['S{a} {{{kv}}}', 'S{a} {{{kv}}}', 'S{a}{{{kv}}}', 'mk({kvd})'])
        if form.startswith('mk'):
            e = f'mk({{{", ".join(kv)}}})'
        else:
            e = f'S{args} {{{", ".join(kv)}}}'
        insts.append(f's{i} = {e}')
    if any(i.split(' = ', 1)[1].startswith('mk(') for i in insts):
        src += 'mk = lambda c: {str:} -> S {\n    S {**c}\n}\n'
    src += '\n'.join(insts) + '\n'
    if r.random() < 0.3:
        src += r.choice(['n = len(S.instances())', 'all = [v.x for v in S.instances()]', 'ks = [k for k in s0]', 't = typeof(s0)', 'o = s0.old', 'h = s0?.name', 'd = {**s0}']) + '\n'
    out.append(src)
print("#---\n".join(out))
