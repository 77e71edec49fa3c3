#!/usr/bin/env python3
"""Three-level schema inheritance with a mixin and protocol, redeclared attributes, checks at two levels and instances of each level.

Usage: inheritance.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    L.append("schema Base:")
    L.append(f"    a: int = {r.randint(0,3)}")
    L.append(f"    b?: str")
    if r.random() < 0.5:
        L.append(f"    tags: [str] = [\"base\"]")
    if r.random() < 0.4:
        L.append("    check:\n        a >= 0, \"a neg\"")
    mixin = r.random() < 0.4
    if mixin:
        L.append("protocol P:\n    a: int")
        L.append("mixin AMixin for P:\n    c: int = a * 10")
    L.append("schema Mid(Base):")
    if mixin:
        L.append("    mixin [AMixin]")
    L.append(f"    a: int = {r.randint(4,6)}")
    L.append(f"    m: str = \"mid${{a}}\"")
    if r.random() < 0.5:
        L.append(f"    tags: [str] = [\"mid\"]")
    L.append("schema Leaf(Mid):")
    L.append(f"    b: str = \"leaf\"")
    if r.random() < 0.4:
        L.append(f"    a: int = {r.randint(-2,9)}")
    if r.random() < 0.3:
        L.append(f"    {r.choice(['a', 'm', 'tags'])}: {r.choice(['str', 'int', '[int]', 'float'])}")
    if r.random() < 0.4:
        L.append("    check:\n        a < 8, \"a big\"")
    insts = [f"x = Leaf {{}}", f"y = Leaf {{a = {r.randint(-1,10)}}}", f"z = Mid {{b = \"z\"}}", f"w = Base {{a = -1}}", f"v = Leaf {{tags += [\"v\"]}}", f"u = Leaf {{c = 1}}", f"t: Base = Leaf {{}}", f"q: Leaf = Base {{}}", f"p = Leaf {{}} | {{a = 7}}", f"o = Base.instances()"]
    L += r.sample(insts, r.randint(1, 3))
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
