#!/usr/bin/env python3
"""Broken programs: a small valid program (schemas, configs, lists, lambdas, if blocks,
comprehensions, strings) with one or two token-level edits (a token dropped, doubled or
swapped with its neighbour, a bracket or colon or comma put in, a line break or indent put in
or taken out). The parser's first message (and where the program parses, everything after)
is compared.

Usage: syntax.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, re, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
BASES = [
    'schema S:\n    a: int = 1\n    b?: [str]\n\n    check:\n        a > 0, "pos"\n\ns = S {a = 2, b = ["x"]}\n',
    'config = {\n    name = "app"\n    labels: {k = "v"}\n    ports += [80]\n}\n',
    'items = [x * 2 for x in [1, 2, 3] if x > 1]\nd = {str(k): v for k, v in {a = 1}.items()}\n',
    'f = lambda x: int, y = 1 -> int {\n    x + y\n}\nr = f(1, y = 2)\n',
    'a = 1\nif a > 0:\n    b = "pos"\nelif a < 0:\n    b = "neg"\nelse:\n    b = "zero"\n',
    'x = {a = 1, b = {c = [1, 2]}}\ny = x.b.c[0]\nz = "${x.a}-${y}"\n',
    'schema Base:\n    name: str\n\nschema App(Base):\n    replicas: int = 1\n    [k: str]: any\n\napp = App {name = "a", extra = True}\n',
    'import math\nv = math.floor(1.5) if True else None\nw = [*[1], **{}] if False else []\n',
    'l = [\n    1\n    2\n]\nm = {\n    "k": 1\n    if True: j = 2\n}\n',
    'type T = "a" | "b"\nt: T = "a"\nassert t == "a", "msg" if True\n',
    'schema R:\n    x: int\n    y: int = x * 2\n\nr = R {\n    x = 3\n}\ns = r | {x = 4}\n',
    'n = 1 + 2 * (3 - 4) // 5 % 6 ** 2\nb = not n and n or n in [1] and n is not None\n',
]
PUT = ['(', ')', '[', ']', '{', '}', ':', ',', '=', '\n', '    ', '.', '+', '"', 'if', 'else', 'for', 'lambda', '->', '**', '|', '?', '@', '$']

def tokens(src):
    # words, numbers, strings, operators, spaces and line breaks, so edits stay token-sized
    return re.findall(r'"(?:[^"\\\n]|\\.)*"|\w+|->|\*\*|//|[<>=!+\-*/%|&^]=?|\n|[ ]+|\S', src)

out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    toks = tokens(r.choice(BASES))
    for _ in range(r.choice([1, 1, 2])):
        i = r.randrange(len(toks))
        kind = r.choice(['drop', 'drop', 'double', 'swap', 'put', 'put', 'newline', 'indent'])
        if kind == 'drop':
            del toks[i]
        elif kind == 'double':
            toks.insert(i, toks[i])
        elif kind == 'swap' and i + 1 < len(toks):
            toks[i], toks[i + 1] = toks[i + 1], toks[i]
        elif kind == 'put':
            toks.insert(i, r.choice(PUT))
        elif kind == 'newline':
            toks.insert(i, '\n')
        elif kind == 'indent':
            j = max(k for k in range(i + 1) if k == 0 or toks[k - 1] == '\n')
            toks.insert(j, '    ')
    out.append(''.join(toks).rstrip('\n') + '\n')
print("#---\n".join(out))
