#!/usr/bin/env python3
"""System modules (math, units, net, regex, base64, base32, crypto, json, yaml, template,
manifests) called with arguments of every kind, typed `any` so the run time decides.

Usage: modules.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
nums = ['0', '1', '-1', '2.5', '-0.5', '1e308', '100', '1024', '1000000', '0.001', '1.5e10', 'True', 'None', '"3"']
strs = ['""', '"abc"', '"a.b.c"', '"1.2.3.4"', '"::1"', '"fe80::1"', '"224.0.0.1"', '"0.0.0.0"', '"127.0.0.1:80"',
        '"[::1]:80"', '"host"', '"a1b22c333"', '"  x  "', '"日本"', '"<a href=\'x\'>&</a>"', '"YWJj"', '"MFRGG==="', '"a,b,,c"',
        '"{\\"a\\": 1}"', '"a: 1\\nb: [1, 2]\\n"', '"- 1\\n---\\n- 2\\n"', '"{{.a}}-{{.b}}"', '"10.0.0.0/8"', '"1Gi"', '"x"']
vals = nums + strs + ['[1, 2]', '{a = 1, _b = 2, c = None}', '{"k": [1, {z = None}]}', '[]', '{}']
pats = ['"a"', '"[a-z]+"', '"\\\\d+"', '"^a"', '"(a)(b)?"', '"."', '"[" ', '"x*"', '","']
calls = [
    ('math', ['math.ceil(<n>)', 'math.floor(<n>)', 'math.exp(<n>)', 'math.expm1(<n>)', 'math.factorial(<n>)', 'math.gcd(<n>, <n>)',
              'math.isfinite(<n>)', 'math.isinf(<n>)', 'math.isnan(<n>)', 'math.log(<n>)', 'math.log(<n>, <n>)', 'math.log1p(<n>)',
              'math.log2(<n>)', 'math.log10(<n>)', 'math.modf(<n>)', 'math.pow(<n>, <n>)', 'math.sqrt(<n>)']),
    ('units', ['units.to_K(<n>)', 'units.to_Ki(<n>)', 'units.to_M(<n>)', 'units.to_Mi(<n>)', 'units.to_G(<n>)', 'units.to_Gi(<n>)',
               'units.to_T(<n>)', 'units.to_P(<n>)', 'units.to_n(<n>)', 'units.to_u(<n>)', 'units.to_m(<n>)', 'units.K * <n>', 'units.Mi']),
    ('net', ['net.split_host_port(<s>)', 'net.join_host_port(<s>, <n>)', 'net.is_IPv4(<s>)', 'net.is_IP(<s>)', 'net.is_loopback_IP(<s>)',
             'net.is_multicast_IP(<s>)', 'net.is_interface_local_multicast_IP(<s>)', 'net.is_link_local_multicast_IP(<s>)',
             'net.is_link_local_unicast_IP(<s>)', 'net.is_global_unicast_IP(<s>)', 'net.is_unspecified_IP(<s>)', 'net.to_IP4(<s>)',
             'net.to_IP16(<s>)', 'net.parse_IP(<s>)', 'net.IP_string(<s>)', 'net.is_IP_in_CIDR(<s>, <s>)', 'net.CIDR_subnet(<s>, <n>, <n>)']),
    ('regex', ['regex.match(<s>, <p>)', 'regex.search(<s>, <p>)', 'regex.findall(<s>, <p>)', 'regex.split(<s>, <p>)',
               'regex.replace(<s>, <p>, "_")', 'regex.replace(<s>, <p>, "_", <n>)', 'regex.compile(<p>)', 'regex.split(<s>, <p>, <n>)']),
    ('base64', ['base64.encode(<s>)', 'base64.decode(<s>)', 'base64.encode(<v>)']),
    ('base32', ['base32.encode(<s>)', 'base32.decode(<s>)']),
    ('crypto', ['crypto.md5(<s>)', 'crypto.sha1(<s>)', 'crypto.sha256(<s>)', 'crypto.sha512(<s>)', 'crypto.sha224(<s>)', 'crypto.sha384(<s>)',
                'crypto.blake3(<s>)', 'crypto.uuid() != ""', 'crypto.filesha256("main.k") != ""', 'crypto.md5(<s>, encoding="utf-8")']),
    ('json', ['json.encode(<v>)', 'json.encode(<v>, sort_keys=True)', 'json.encode(<v>, indent=2)', 'json.encode(<v>, ignore_private=True)',
              'json.encode(<v>, ignore_none=True)', 'json.decode(<s>)', 'json.validate(<s>)']),
    ('yaml', ['yaml.encode(<v>)', 'yaml.encode(<v>, sort_keys=True)', 'yaml.encode(<v>, ignore_private=True)', 'yaml.encode(<v>, ignore_none=True)',
              'yaml.encode_all([<v>, <v>])', 'yaml.decode(<s>)', 'yaml.decode_all(<s>)', 'yaml.validate(<s>)']),
    ('template', ['template.execute(<s>, {a = <v>, b = 2})', 'template.html_escape(<s>)', 'template.execute("{{if .a}}y{{else}}n{{end}}", {a = <v>})']),
    ('manifests', ['manifests.yaml_stream([<v>])', 'manifests.yaml_stream([<v>, <v>], opts={sort_keys = True})']),
]
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    mods = r.sample(calls, r.randint(1, 2))
    imports = sorted({m for m, _ in mods})
    L = [f'import {m}' for m in imports]
    for i in range(r.randint(1, 3)):
        _, fs = r.choice(mods)
        f = r.choice(fs)
        for key, pool in (('<n>', nums), ('<s>', strs), ('<v>', vals), ('<p>', pats)):
            while key in f:
                f = f.replace(key, r.choice(pool), 1)
        e = f
        L.append(f'v{i}: any = {e}')
    out.append('\n'.join(L) + '\n')
print("#---\n".join(out))
