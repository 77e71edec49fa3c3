#!/usr/bin/env python3
"""Reading into values: `.` and `?.` selectors, `[i]` and `?[i]` subscripts, slices with steps
and negative bounds, on dicts, lists, strings, schema instances (declared, optional, unknown and
index-signature attributes), None and Undefined; in globals, schema bodies and lambdas.

Usage: selectors.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
bases = {
    'd': '{a = 1, b = {c = [1, 2, 3]}, "d-e" = "x"}',
    'l': '[1, [2, 3], {a = 4}, "five"]',
    's': '"hello"',
    'n': 'None',
    'u': 'Undefined',
    'i': 'S {x = 1}',
    'j': 'T {k = "v"}',
}
paths = ['.a', '?.a', '.b.c', '?.b?.c', '.b.c[1]', '?.b?.c?[5]', '[0]', '?[0]', '[-1]', '[9]', '?[9]',
         '[1][0]', '[2].a', '[1:3]', '[::-1]', '[-2:]', '[::2]', '[1:-1:1]', '.x', '.y', '?.y', '.k',
         '.zz', '?.zz', '["a"]', '["d-e"]', '?["q"]', '.upper()', '[0:0]', '[5:1]', '.b["c"][0]']
for s in range(seed, seed + n):
    r = random.Random(s)
    L = ["schema S:", "    x: int", "    y?: str", "schema T:", "    [str]: str"]
    names = r.sample(list(bases), r.randint(1, 3))
    for nm in names:
        L.append(f"_{nm} = {bases[nm]}")
    where = r.random()
    exprs = [f"_{r.choice(names)}{r.choice(paths)}" for _ in range(r.randint(1, 3))]
    if where < 0.6:
        for i, e in enumerate(exprs):
            L.append(f"r{i} = {e}")
    elif where < 0.8:
        L.append("schema R:")
        for i, e in enumerate(exprs):
            L.append(f"    r{i}: any = {e}")
        L.append("out = R {}")
    else:
        L.append("f = lambda {")
        L.append(f"    [{', '.join(exprs)}]")
        L.append("}")
        L.append("out = f()")
    if r.random() < 0.2:
        L.append(f"t = typeof({exprs[0]})")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
