#!/usr/bin/env python3
"""Indentation of the lines inside brackets: upstream's lexer gives no indent or dedent there but
moves its indentation stack all the same, so a bracket's lines and its closer, indented anywhere
(deeper than the statement, back at an enclosing block's level, at column 0, between levels),
change which block the following lines belong to and which dedents the parser sees. Blocks are
`if`/`elif`/`else` bodies, schema bodies and check blocks, nested; the bracketed values are
lists, dicts, calls, comprehensions and lambdas.

Usage: layout.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])


def bracketed(r, cur):
    """A multi-line bracketed value whose lines after the first are indented at random."""
    def ind():
        return " " * r.choice([0, 0, 2, cur, cur, cur + 4, cur + 4, cur + 8, max(cur - 4, 0), 1])
    kind = r.choice(["list", "dict", "call", "comp", "lambda"])
    items = [str(r.randint(1, 9)) for _ in range(r.randint(1, 3))]
    if kind == "list":
        head, close, body = "[", "]", [i + "," for i in items]
    elif kind == "dict":
        head, close, body = "{", "}", [f"k{j} = {i}" for j, i in enumerate(items)]
    elif kind == "call":
        head, close, body = "max(", ")", [i + "," for i in items]
    elif kind == "comp":
        head, close, body = "[", "]", ["x * 2", "for x in [" + ", ".join(items) + "]"]
    else:
        head, close, body = "(lambda y {", "})(1)", ["y + " + items[0]]
    lines = [head] + [ind() + b for b in body]
    if r.random() < 0.4:
        lines[-1] += close
    else:
        lines.append(ind() + close)
    return "\n".join(lines)


def block(r, cur, depth, names, in_schema):
    """Statements of a block at indentation `cur`."""
    out = []
    for _ in range(r.randint(1, 3)):
        name = f"v{len(names)}"
        names.append(name)
        k = r.random()
        pad = " " * cur
        if k < 0.5:
            ann = ": any" if in_schema and r.random() < 0.5 else ""
            out.append(f"{pad}{name}{ann} = {bracketed(r, cur)}")
        elif k < 0.7 and depth < 3:
            cond = r.choice(["True", "False"])
            out.append(f"{pad}if {cond}:")
            out += block(r, cur + 4, depth + 1, names, in_schema)
            if r.random() < 0.4:
                out.append(f"{pad}else:")
                out += block(r, cur + 4, depth + 1, names, in_schema)
        else:
            out.append(f"{pad}{name} = {r.randint(1, 9)}")
        if r.random() < 0.15:
            # a stray line at some width
            out.append(" " * r.choice([0, 2, cur + 4, max(cur - 4, 0)]) + f"w{len(names)} = 1")
    return out


for s in range(seed, seed + n):
    r = random.Random(s)
    names = []
    L = []
    for _ in range(r.randint(1, 2)):
        k = r.random()
        if k < 0.4:
            L.append(f"schema S{len(L)}:")
            name = f"S{len(L) - 1}"
            L += block(r, 4, 1, names, True)
            if r.random() < 0.3:
                L += ["    check:", "        " + bracketed(r, 8).replace("\n", "\n        ") + " != None"]
            if r.random() < 0.8:
                L.append(f"s{len(L)} = {name} {{}}")
        elif k < 0.7:
            L.append(f"if {r.choice(['True', 'False'])}:")
            L += block(r, 4, 1, names, False)
        else:
            L += block(r, 0, 0, names, False)
    if r.random() < 0.6:
        L.append(f"end = {r.randint(1, 9)}")
    print("\n".join(L))
    if s != seed + n - 1:
        print("#---")
