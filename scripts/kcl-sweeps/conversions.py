#!/usr/bin/env python3
"""Values flowing into schema-typed slots: dicts, instances, lists and None given to `A`,
`A | B`, `[A]`, `{str:A}`, `A | {str:}` and optional slots, where upstream converts them
(annotated globals, schema defaults and config entries, body assignments, lambda parameters
and returns), with required attributes, checks, defaults computed from siblings and `typeof`.

Usage: conversions.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
types = ['A', 'A | B', '[A]', '{str:A}', 'A | {str:}', 'B | A', '[A | B]', '{str:[A]}']
values = ['{a = 1}', '{a = 5}', '{b = "x"}', '{}', '{a = 1, b = "x"}', '{a = 1, z = 2}',
          '{a = "s"}', 'A {a = 2}', 'B {b = "y"}', 'None', '[{a = 1}]', '[{a = 1}, {b = "x"}]',
          '{k = {a = 1}}', '{k = [{a = 3}]}', '[]', '{k = {}}', '{a = 1, c = 9}']
for s in range(seed, seed + n):
    r = random.Random(s)
    L = ["schema A:", "    a: int", "    d: int = a * 2" if r.random() < 0.6 else "    d?: int"]
    if r.random() < 0.5:
        L += ["    check:", "        a < 4, \"a too big\""]
    if r.random() < 0.3:
        L.append("    c?: int = 0")
    L += ["schema B:", "    b: str", '    e: str = "e"']
    t = r.choice(types)
    v = r.choice(values)
    place = r.random()
    if place < 0.25:
        L.append(f"x: {t} = {v}")
    elif place < 0.45:
        L.append("schema H:")
        L.append(f"    x: {t} = {v}")
        if r.random() < 0.5:
            L.append("    y = typeof(x)")
        L.append("h = H {}" if r.random() < 0.5 else f"h = H {{x = {r.choice(values)}}}")
    elif place < 0.6:
        L.append("schema H:")
        L.append(f"    x?: {t}")
        L.append(f"    x = {v}")
        if r.random() < 0.5:
            L.append("    y = typeof(x)")
        L.append("h = H {}")
    elif place < 0.75:
        L.append(f"f = lambda p: {t} {{")
        L.append("    p")
        L.append("}")
        L.append(f"x = f({v})")
    elif place < 0.9:
        L.append(f"f = lambda q -> {t} {{")
        L.append("    q")
        L.append("}")
        L.append(f"x = f({v})")
    else:
        L.append("schema H:")
        L.append(f"    x: {t}")
        L.append("mk = lambda c: {str:} { H {**c} }")
        L.append(f"h = mk({{x = {v}}})")
    if r.random() < 0.3:
        L.append("t = typeof(x) if x else None" if place < 0.25 or 0.6 <= place < 0.9 else "t = 1")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
