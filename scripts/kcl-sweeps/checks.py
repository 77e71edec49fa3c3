#!/usr/bin/env python3
"""Schemas with optional and defaulted attributes of several types, check blocks with guards and messages, and configs that break them.

Usage: checks.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
tys = ['int', 'str', '[int]', '{str:int}', 'bool', 'float', 'int|str', '"a"|"b"']
defaults = {'int': ['1', '0', '-1'], 'str': ['"x"', '""'], '[int]': ['[1]', '[]'], '{str:int}': ['{a = 1}', '{}'], 'bool': ['True', 'False'], 'float': ['1.5'], 'int|str': ['1', '"z"'], '"a"|"b"': ['"a"']}
conds = ['{a} > 0', 'len({a}) > 0', '{a}', 'not {a}', '{a} in ["x", "a"]', '{a} != None', 'typeof({a}) == "int"', '{a} if {a} else True']
for s in range(seed, seed + n):
    r = random.Random(s)
    attrs = []
    L = ["schema S:"]
    for i in range(r.randint(1, 4)):
        t = r.choice(tys); nm = f"f{i}"
        opt = '?' if r.random() < 0.4 else ''
        d = f" = {r.choice(defaults[t])}" if r.random() < 0.5 else (" = None" if r.random() < 0.2 else "")
        L.append(f"    {nm}{opt}: {t}{d}")
        attrs.append((nm, t))
    if r.random() < 0.8:
        L.append("    check:")
        for _ in range(r.randint(1, 3)):
            nm, t = r.choice(attrs)
            c = r.choice(conds).format(a=nm)
            msg = f', "bad {nm}"' if r.random() < 0.5 else ''
            guard = f" if {nm}" if r.random() < 0.3 else ''
            L.append(f"        {c}{guard}{msg}")
    cfg = []
    for nm, t in attrs:
        if r.random() < 0.5:
            v = r.choice(defaults[t] + ['None', '2', '"q"'])
            cfg.append(f"{nm} = {v}")
    L.append(f"s = S {{{', '.join(cfg)}}}")
    if r.random() < 0.3:
        L.append(f"t = S {{}}")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
