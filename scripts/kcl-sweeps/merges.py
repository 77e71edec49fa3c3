#!/usr/bin/env python3
"""Merging schema instances: `|` between instances and dicts, repeated keys of one config
literal holding instances and dicts, repeated declarations of a global with reads of it between
them (upstream computes such a global ahead, then unifies again), with computed attributes,
optional ones and checks, so whether a merge makes the instance again (and which config keys it
keeps) shows in the output or in the check that fails.

Usage: merges.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
schemas = '''schema C:
    image: str = "nginx"
    tag: str = "latest"
    x?: str
    args?: [str]
    full: str = "${image}:${tag}"
    check:
        x != "bad" or tag == "latest", "bad x"

schema D:
    m: C = C {}
    cs: {str:C} = {}
    n: int = 1
    check:
        n >= 0
'''
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    names = []

    def attrs(k=None):
        es = []
        for a in r.sample(['image', 'tag', 'x', 'args'], r.randint(0 if k is None else 1, 2)):
            op = r.choice(['=', '=', '=', ':'])
            if a == 'args':
                op = r.choice(['=', ':', '+='])
                v = f'["{r.choice("pq")}"]'
            elif a == 'x':
                v = r.choice(['"bad"', '"ok"', '"ok"', '"ok"'])
            else:
                v = f'"{r.choice("abt")}"'
            es.append(f'{a} {op} {v}')
        return ', '.join(es)

    def cval(allow_ref=True):
        k = r.random()
        if allow_ref and names and k < 0.2:
            return r.choice(names)
        if k < 0.6:
            return f'C {{{attrs()}}}'
        return f'{{{attrs(1)}}}'

    def dval():
        es = []
        for _ in range(r.randint(1, 3)):
            key = r.choice(['m', 'm', 'cs.k', 'cs.j', 'n'])
            if key == 'n':
                es.append(f'n = {r.choice([2, -1, 3, 4, 5])}')
            else:
                es.append(f'{key}{r.choice([":", ":", " ="])} {cval(False)}')
        return es

    body = []
    for i in range(r.randint(1, 2)):
        nm = f'c{i}'
        body.append(f'{nm} = C {{{attrs()}}}')
        names.append(nm)
    for i in range(r.randint(2, 4)):
        k = r.random()
        if k < 0.3:
            # (a dict first is the checker's error with a dict of another type after it)
            first = r.choice(names) if r.random() < 0.4 else f'C {{{attrs()}}}'
            ops = [first] + [cval(False) for _ in range(r.randint(1, 2))]
            body.append(f'e{i} = ' + ' | '.join(ops))
        elif k < 0.55:
            es = [f'm: {cval(False)}' for _ in range(r.randint(2, 3))]
            body.append(f'e{i} = {{' + ', '.join(es) + '}')
        elif k < 0.8:
            body.append(f'e{i} = D {{' + ', '.join(dval()) + '}')
            if r.random() < 0.6:
                body.append(f'f{i} = e{i} | ' + r.choice([
                    f'{{m: {cval(False)}}}', f'D {{{", ".join(dval())}}}', f'{{m = {cval(False)}}}',
                    f'{{cs: {{k: {cval(False)}}}}}']))
            if r.random() < 0.4:
                body.append(f'g{i} = e{i}.m | {cval(False)}')
        else:
            for j in range(r.randint(2, 3)):
                body.append(f'app: D {{' + ', '.join(dval()) + '}')
                if r.random() < 0.4:
                    body.append(r.choice([f'r{i}{j} = app', f'r{i}{j} = app.m.full', f'r{i}{j} = len(app.cs)']))
    out.append(schemas + '\n'.join(body) + '\n')
print("#---\n".join(out))
