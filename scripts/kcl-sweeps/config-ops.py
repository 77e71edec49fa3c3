#!/usr/bin/env python3
"""Config literals mixing `=`, `:` and `+=` on plain, dotted and indexed keys, with if and ** entries, merged with `|` or into schemas.

Usage: config-ops.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
vals = ['1', '[1, 2]', '[3]', '{k = 1}', '{k: 2}', '"s"', 'None', 'Undefined', '[]', '{}']
keys = ['a', 'b', 'a.c', 'b.d', 'a[0]', 'b[-1]', 'a[1]']
ops = [' = ', ': ', ' += ']
for s in range(seed, seed + n):
    r = random.Random(s)
    def entry():
        k = r.choice(keys)
        op = r.choice(ops)
        if '[' in k and op == ': ' and r.random() < 0.5:
            op = ' = '
        return k + op + r.choice(vals)
    def config(m):
        es = [entry() for _ in range(m)]
        if r.random() < 0.2:
            es.append(f"if {r.choice(['True','False'])}: {entry()}")
        if r.random() < 0.2:
            es.append("**" + r.choice(['{a = [9]}', 'base', '{b: {d = 1}}']))
        return "{" + ", ".join(es) + "}"
    lines = ["base = " + config(r.randint(1, 3))]
    form = r.randint(0, 3)
    if form == 0:
        lines.append("x = base | " + config(r.randint(1, 3)))
    elif form == 1:
        lines.append("schema S:\n    a?: any\n    b?: any")
        lines.append("x = S " + config(r.randint(1, 4)))
        if r.random() < 0.5:
            lines.append("y = x | " + config(r.randint(1, 2)))
    elif form == 2:
        lines.append("x = " + config(r.randint(2, 5)))
    else:
        lines.append("x = base")
        lines.append("x: " + config(r.randint(1, 3)))
    out.append("\n".join(lines) + "\n")
print("#---\n".join(out))
