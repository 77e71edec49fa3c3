#!/usr/bin/env python3
"""List and dict comprehensions and quantifiers over lists, dicts, strings, None and numbers, with one or two loop variables and guards.

Usage: comprehensions.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
its = ['[1, 2, 3]', '{a = 1, b = 2}', '"abc"', '[]', '{}', '[[1, 2], [3]]', '[{k = 1}, {k = 2}]', 'range(3)', 'None', '1', '[1, None]', 'data', 'd']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = ["data = [1, 2, 3]", "d = {x = 1, y = 2}"]
    kind = r.randint(0, 4)
    it = r.choice(its); it2 = r.choice(its)
    v2 = r.random() < 0.4
    vars1 = "k, v" if v2 else "x"
    use = "v" if v2 else "x"
    cond = r.choice(['', f' if {use}', f' if {use} != 2', f' if not {use}'])
    if kind == 0:
        L.append(f"r = [{use} for {vars1} in {it}{cond}]")
    elif kind == 1:
        key = "k" if v2 else f'"${{{use}}}"'
        L.append(f"r = {{{key}: {use} for {vars1} in {it}{cond}}}")
    elif kind == 2:
        L.append(f"r = [[{use}, y] for {vars1} in {it} for y in {it2}{cond}]")
    elif kind == 3:
        q = r.choice(['all', 'any', 'map', 'filter'])
        body = r.choice([f'{use}', f'{use} > 1', f'{use} + 1', f'typeof({use}) == "int"'])
        L.append(f"r = {q} {vars1} in {it} {{\n    {body}\n}}")
    else:
        L.append(f"r = [{use} * 2 for {vars1} in {it}] + [y for y in {it2} if y]")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
