#!/usr/bin/env python3
"""A main package importing another (aliased or not, nested paths, two files) and using its schemas, variables, lambdas and missing members.

Usage: imports.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    files = {}
    pk = r.choice(['pkg', 'a.b', 'lib'])
    path = pk.replace('.', '/')
    alias = r.choice(['', ' as p', ' as q'])
    ref = (alias.split()[-1] if alias else pk.split('.')[-1])
    body = ["schema S:", "    name: str = \"pkg\"", f"    n: int = {r.randint(0,5)}", "", f"v = {r.randint(0,9)}", "_hidden = 1", "f = lambda x { x * 2 }"]
    if r.random() < 0.4:
        body.append("schema T(S):\n    extra: [int] = [n]")
    files[f"{path}/a.k"] = "\n".join(body) + "\n"
    if r.random() < 0.3:
        files[f"{path}/b.k"] = f"w = v + {r.randint(1,3)}\n"
    main = [f"import {pk}{alias}", "schema S:", "    own: bool = True", ""]
    uses = [f"x = {ref}.S {{}}", f"y = {ref}.S {{name = \"m\", n = 7}}", f"z: {ref}.S = {{n = 1}}", f"k = {ref}.v", f"h = {ref}.f(3)", f"o = S {{}}", f"t = typeof({ref}.S {{}})", f"u = {ref}._hidden", f"i = {ref}.S.instances()", f"m = {ref}.zz", f"w = {ref}.w", f"e = {ref}.T {{}}", f"c: S = {ref}.S {{}}", f"d = [{ref}.S {{n = i}} for i in range(2)]"]
    main += r.sample(uses, r.randint(1, 4))
    files["main.k"] = "\n".join(main) + "\n"
    txt = files.pop("main.k")
    for k, v in files.items():
        txt += f"#file: {k}\n{v}"
    out.append(txt)
print("#---\n".join(out))
