#!/usr/bin/env python3
"""Runtime failures inside expressions written over several lines (lists, dicts, calls, lambdas,
comprehensions, quantifiers, string interpolation, check blocks and asserts): upstream reports a
runtime error on the line it evaluated last, so the failing part's line and the lines around it
are what varies.

Usage: multiline.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
fails = ['[1][5]', 'int("x")', '1 / 0', '{a = 1}["a"] + "s"', '"abc".index("z")', '[1, 2].index(9)',
         'float("q")', '_u.b.c', '"%d" % "a"', 'sum([1, "a"])', 'max([])', '_f(0)', '10 % 0']
goods = ['1', '"s"', '[2]', '{k = 1}', '_n', 'len("ab")', 'True']
def wrap(r, inner, depth):
    """`inner` placed in a random multi-line construct (closed at the construct's own indent, as
    upstream's lexer wants)."""
    if depth == 0:
        return inner
    k = r.random()
    pre = [r.choice(goods) for _ in range(r.randint(0, 2))]
    post = [r.choice(goods) for _ in range(r.randint(0, 2))]
    raw = wrap(r, inner, depth - 1)
    inner = raw.replace("\n", "\n    ")
    if k < 0.25:
        items = pre + [inner] + post
        if r.random() < 0.6 or "\n" in inner:
            return "[\n    " + ",\n    ".join(items) + "\n]"
        return "[" + ", ".join(items) + "]"
    if k < 0.45:
        items = [f"k{i} = {v}" for i, v in enumerate(pre + [inner] + post)]
        return "{\n    " + "\n    ".join(items) + "\n}"
    if k < 0.6:
        if r.random() < 0.5:
            return f"_g(\n    {inner}\n)"
        return f"_g(\n    {inner},\n    {r.choice(goods)}\n)"
    if k < 0.7:
        if r.random() < 0.5:
            return f"[x for x in [1, 2] if {inner}]" if "\n" not in inner else f"[\n    x for x in [1, 2] if {inner}\n]"
        return f"[\n    {inner} for x in [1]\n]"
    if k < 0.8:
        return f"all x in [1] {{\n    {inner}\n}}"
    if k < 0.9 and "\n" not in inner:
        return f'"v${{{raw}}}"'
    return f"{r.choice(goods)} if {r.choice(['True', 'False'])} else {raw}"
for s in range(seed, seed + n):
    r = random.Random(s)
    L = ["_n = 2", "_u = Undefined", "_f = lambda x {", "    10 / x", "}", "_g = lambda a, b = 0 {", "    a", "}"]
    e = wrap(r, r.choice(fails), r.randint(1, 3))
    where = r.random()
    if where < 0.45:
        L.append(f"x = {e}")
    elif where < 0.6:
        L.append(f"assert {e}, \"msg\"" if r.random() < 0.5 else f"assert {e}")
    elif where < 0.8:
        L += ["schema S:", "    a: int = 1", "    b: any = " + e.replace("\n", "\n    "), "s = S {}"]
    elif where < 0.9:
        L += ["schema S:", "    a: int = 1", "    check:", "        " + e.replace("\n", "\n        ") + (', "bad"' if r.random() < 0.4 else ''), "s = S {}"]
    else:
        L += ["h = lambda {", "    y = " + e.replace("\n", "\n    "), "    y", "}", "z = h()"]
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
