#!/usr/bin/env python3
"""A schema body's statements that start with `[`: index signatures and list expressions, made
from a random run of tokens after the `[` (names, keywords, `:`, `...`, `]`, literals, types,
`.`, `=`), with line breaks and indentation changes dropped in between, beside ordinary
attributes, then an instance. Upstream's parser decides what such a `[` starts from the tokens
after it, a line break (and an indent or dedent after it) counting as tokens.

Usage: schema-brackets.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
POOL = ['k', 'name', 'str', 'int', 'x', 'if', 'else', 'True', 'None', 'not', 'lambda', ':',
        ':', '...', ']', ']', '1', '"a"', '[', '.', '=', ',', '[str]', '{str:int}', 'for']
TAILS = [']: int', ']: str = "v"', ']', '', ']: any', ': str]: int', ']: [int]', ' for k in []]']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = ["schema S:"]
    if r.random() < 0.5:
        L.append("    a: int = 1")
    line = "    ["
    for _ in range(r.randint(0, 4)):
        if r.random() < 0.15:
            # a line break, the next line indented as the body, further, or less
            L.append(line)
            line = r.choice(["    ", "    ", "        ", "", "  "])
        tok = r.choice(POOL)
        line += (" " if line.strip() and r.random() < 0.6 else "") + tok
    line += r.choice(TAILS)
    L.append(line)
    if r.random() < 0.6:
        L.append("    b: str = \"s\"")
    L.append("")
    L.append(r.choice(["s = S {}", "s = S {a = 2}", "s = S {extra = 1}", "s = 1"]))
    out.append("\n".join(L) + "\n")
print("\n#---\n".join(out))
