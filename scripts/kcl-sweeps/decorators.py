#!/usr/bin/env python3
"""Decorators: `@deprecated` (bare, with version/reason/strict, positional arguments, wrong
keywords) and `@info` on schemas, attributes (own, inherited, optional, with defaults), rules;
unknown decorators; instances made by call, by config, by conversion and in lists.

Usage: decorators.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
decos = ['@deprecated', '@deprecated()', '@deprecated(version="1.2")', '@deprecated(reason="use y")',
         '@deprecated(version="2", reason="gone", strict=False)', '@deprecated(strict=False)',
         '@deprecated(strict=True)', '@info(note="x")', '@info', '@deprecated("1.0")',
         '@deprecated(versio="1")', '@unknown', '@deprecated(version=1)', '@deprecated(strict="no")']
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    target = r.random()
    d = r.choice(decos)
    if target < 0.3:
        L += [d, "schema S:", "    a: int = 1", "    b?: str"]
    elif target < 0.8:
        L += ["schema S:", "    a: int = 1"]
        if r.random() < 0.5:
            L.append(f"    {d}")
            L.append("    b" + r.choice(['?', '']) + ": str" + r.choice([' = "x"', '']))
        else:
            L.append(f"    {d}")
            L.append(f"    c?: [int]")
        if r.random() < 0.3:
            L += ["schema T(S):", "    z: int = 2"]
    else:
        L += [d, "rule R:", "    True"]
    uses = []
    for _ in range(r.randint(1, 3)):
        k = r.random()
        name = 'T' if 'schema T(S):' in L and r.random() < 0.5 else 'S'
        if 'rule R:' in L:
            uses.append(r.choice(["R()", "R {}", "x = R()"]))
        elif k < 0.3:
            uses.append(f"x{len(uses)} = {name} {{}}")
        elif k < 0.5:
            uses.append(f"x{len(uses)} = {name} {{b = \"q\"}}")
        elif k < 0.6:
            uses.append(f"x{len(uses)} = {name} {{c = [1]}}")
        elif k < 0.7:
            uses.append(f"x{len(uses)} = {name}()")
        elif k < 0.8:
            uses.append(f"x{len(uses)}: {name} = {{b = \"r\"}}")
        elif k < 0.9:
            uses.append(f"x{len(uses)} = [{name} {{}}, {name} {{a = 2}}]")
        else:
            uses.append(f"_x{len(uses)} = {name} {{}}")
    L += uses
    if r.random() < 0.3:
        L.append("y = 1")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
