#!/usr/bin/env python3
"""Module-level statements: if/elif/else assigning names, assert with messages and guards,
reassignment of public and private names, augmented assignment, chained targets, assignment
to a dotted or indexed target, type aliases, and reads before and after.

Usage: statements.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
names = ['a', 'b', '_p', 'c']
vals = ['1', '2', '"s"', '[1]', '{k = 1}', 'None', 'True', 'a', 'b + 1', '_p', 'len([1, 2])', 'c.k']
conds = ['True', 'False', 'a', 'a == 1', 'not b', '_p', 'None', '[]', 'a > 0']
def stmt(r, depth):
    k = r.random()
    nm = r.choice(names)
    if k < 0.35:
        return [f'{nm} = {r.choice(vals)}']
    if k < 0.45:
        return [f'{nm} += {r.choice(["1", "[2]", chr(34) + "t" + chr(34)])}']
    if k < 0.52:
        return [f'{nm}: {r.choice(["int", "str", "any", "[int]", "T"])} = {r.choice(vals)}']
    if k < 0.58:
        return [f'{nm} = {r.choice(names)} = {r.choice(vals)}']
    if k < 0.64:
        return [f'{nm}.{r.choice(["k", "x"])} = {r.choice(vals)}']
    if k < 0.68:
        return [f'{nm}[0] = {r.choice(vals)}']
    if k < 0.78:
        guard = f' if {r.choice(conds)}' if r.random() < 0.4 else ''
        msg = f', "m{r.randint(0, 9)}"' if r.random() < 0.5 else ''
        return [f'assert {r.choice(conds)}{guard}{msg}']
    if depth < 2:
        lines = [f'if {r.choice(conds)}:']
        lines += ['    ' + l for _ in range(r.randint(1, 2)) for l in stmt(r, depth + 1)]
        if r.random() < 0.4:
            lines.append(f'elif {r.choice(conds)}:')
            lines += ['    ' + l for l in stmt(r, depth + 1)]
        if r.random() < 0.5:
            lines.append('else:')
            lines += ['    ' + l for l in stmt(r, depth + 1)]
        return lines
    return [f'{nm} = {r.choice(vals)}']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    if r.random() < 0.3:
        L.append('type T = int | str')
    for _ in range(r.randint(2, 5)):
        L += stmt(r, 0)
    out.append('\n'.join(L) + '\n')
print("#---\n".join(out))
