#!/usr/bin/env python3
"""Unification across statements and files: `app: App {...}` declared again and again (in one
file, or in a second file of the main package), nested schemas (dicts and lists of them),
with `=`, `:` and `+=`, selector keys (`containers.main.env.X: ...`), and reads of the result.

Usage: unification.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
schemas = '''schema Env:
    name: str
    value?: str

schema Container:
    image: str = "nginx"
    env?: [Env]
    args?: [str]
    labels?: {str:str}

schema App:
    name: str = "app"
    replicas: int = 1
    containers: {str:Container} = {}
    labels: {str:str} = {}
    ports?: [int]
    extra?: {str:}
'''
entries = [
    'name = "{w}"', 'name: "{w}"', 'replicas = {i}', 'replicas: {i}', 'labels.tier = "{w}"', 'labels: {{"{w}": "x"}}',
    'labels = {{a = "{w}"}}', 'containers.main = Container {{image = "{w}"}}', 'containers.main: {{image = "{w}"}}',
    'containers.main.image = "{w}"', 'containers.main.env += [{{name = "{W}"}}]', 'containers.main.env = [{{name = "{W}", value = "v"}}]',
    'containers.side: {{image = "side"}}', 'containers.main.args += ["{w}"]', 'containers.main.labels.k = "{w}"',
    'ports = [{i}]', 'ports += [{i}]', 'ports: [{i}, 80]', 'extra.a.b = {i}', 'extra: {{c = "{w}"}}',
    'containers: {{main: {{env: [{{name = "{W}"}}]}}}}', 'containers.main: Container {{args = ["x"]}}',
    'replicas = "{w}"', 'containers.main.nope = 1',
]
reads = ['n = app.name', 'c = [k for k in app.containers]', 'e = app.containers.main.env', 'r = app.replicas + 1',
         'l = len(app.labels)', 'imgs = [c.image for _, c in app.containers]']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    def block():
        es = []
        for _ in range(r.randint(1, 3)):
            es.append(r.choice(entries).format(w=r.choice(['a', 'b', 'prod']), W=r.choice(['A', 'B']), i=r.randint(0, 3)))
        return 'app: App {\n' + ''.join(f'    {e}\n' for e in es) + '}\n'
    two = r.random() < 0.5
    first = schemas + block()
    rest = ''.join(block() for _ in range(r.randint(1, 2)))
    if r.random() < 0.4:
        rest += r.choice(['app = App {name = "z"}\n', 'app.replicas = 5\n', 'app: {replicas = 4}\n'])
    if r.random() < 0.4:
        rest += r.choice(reads) + '\n'
    if two:
        out.append('#!args: base.k\n' + rest + '#file: base.k\n' + first)
    else:
        out.append(first + rest)
print("#---\n".join(out))
