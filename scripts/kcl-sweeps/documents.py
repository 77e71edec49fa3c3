#!/usr/bin/env python3
"""Top-level expression statements as output: dicts, schema and rule expressions, lists and
scalars in sequence, inside top-level `if`s, beside public globals, with `-S` selections.

Usage: documents.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
items = ['{c = 1}', '{e = 2}', '{c = 3, f = [1]}', 'S {a = 0}', 'S {a = 1, b = "x"}', 'T {t = 1}',
         'R {a = 2}', '[1]', '1', '"s"', 'True', 'None', 'S {}', '{a = 5}', '{**{g = 1}}',
         'S {a = 0} | {b = "y"}', '_h', 'x = 1', '_y = 2', 'print("p")']
for s in range(seed, seed + n):
    r = random.Random(s)
    L = ["schema S:", "    a?: int", "    b?: str", "schema T:", "    t: int",
         "protocol PProtocol:", "    a?: int", "rule R for PProtocol:", "    True", '_h = {h = 1}']
    for _ in range(r.randint(2, 5)):
        if r.random() < 0.25:
            L.append(f"if {r.choice(['True', 'False', '_h'])}:")
            for _ in range(r.randint(1, 3)):
                L.append("    " + r.choice(items))
            if r.random() < 0.3:
                L.append("else:")
                L.append("    " + r.choice(items))
        else:
            L.append(r.choice(items))
    prog = "\n".join(L) + "\n"
    if r.random() < 0.15:
        prog = "#!args: -S " + r.choice(['a', 'c', 'x']) + "\n" + prog
    out.append(prog)
print("#---\n".join(out))
