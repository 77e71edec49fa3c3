#!/usr/bin/env python3
"""Annotated values of every type kind met by operators, `as` conversions, comprehensions and unary operators (checker and run-time errors).

Usage: types.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
types = ['int', 'float', 'str', 'bool', '[int]', '{str:int}', 'int|str', '"a"|"b"', '1|2', 'any', '[str]', 'S', 'S|T', 'None']
vals = {'int': ['1', '0', '-3'], 'float': ['1.5', '0.0'], 'str': ['"a"', '"xyz"'], 'bool': ['True', 'False'],
        '[int]': ['[1, 2]', '[]'], '{str:int}': ['{a = 1}', '{}'], 'int|str': ['1', '"a"'], '"a"|"b"': ['"a"', '"b"'],
        '1|2': ['1', '2'], 'any': ['1', '"q"', '[1]'], '[str]': ['["a"]'], 'S': ['S {}'], 'S|T': ['T {}', 'S {}'], 'None': ['None']}
ops = ['+', '-', '*', '/', '//', '%', '**', '|', '&', '^', '<<', '>>', '==', '!=', '<', '>', 'in', 'not in', 'and', 'or', 'is', 'is not']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = ["schema S:\n    a: int = 1", "schema T(S):\n    b: int = 2"]
    ta, tb = r.choice(types), r.choice(types)
    L.append(f"x: {ta} = {r.choice(vals[ta])}")
    L.append(f"y: {tb} = {r.choice(vals[tb])}")
    form = r.randint(0, 4)
    if form == 0:
        L.append(f"z = x {r.choice(ops)} y")
    elif form == 1:
        tc = r.choice(types)
        L.append(f"z: {tc} = x {r.choice(ops)} y")
    elif form == 2:
        tc = r.choice(types)
        L.append(f"z = x as {tc}")
    elif form == 3:
        L.append(f"z = [i for i in x]" if r.random() < 0.5 else f"z = {{k: v for k, v in y}}")
    else:
        L.append(f"z = {r.choice(['-', 'not ', '~', '+'])}x")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
