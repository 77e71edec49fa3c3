#!/usr/bin/env python3
"""Calls into the system modules (math, units, net, regex, base64, json, yaml, manifests,
template, crypto, datetime.validate, file's read-only functions) with arguments of the expected
kind and, now and then, of another kind or count: values, floats' printing, errors.

Functions whose result changes from run to run (uuid, now, ticks) or that write files are left
out, and file.read_env (denied by default here, upstream reads any variable). Usage: stdlib.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
NUM = ['0', '1', '-1', '2', '2.5', '-0.5', '16', '1e10', '0.1', '100', '3', '1e-7', '7.0', '-8', '1e300', '12345678901']
INT = ['0', '1', '2', '5', '12', '-3', '20', '100']
IP = ['"192.168.1.1"', '"::1"', '"fe80::1"', '"224.0.0.1"', '"ff01::1"', '"ff02::2"', '"0.0.0.0"', '"::"',
      '"127.0.0.1"', '"8.8.8.8"', '"2001:db8::1"', '"256.1.1.1"', '"1.2.3"', '"abc"', '""', '"::ffff:10.0.0.1"',
      '"169.254.1.1"', '"10.0.0.1"']
CIDR = ['"10.0.0.0/8"', '"192.168.0.0/24"', '"2001:db8::/32"', '"192.168.1.0/30"', '"0.0.0.0/0"', '"10.1.2.3/16"', '"bad"', '"10.0.0.0/33"']
HOSTPORT = ['"host:80"', '"[::1]:443"', '"example.com:8080"', '"noport"', '":9"', '"a:b:c"', '"1.2.3.4:0"']
STR = ['"abc"', '""', '"Hello, World"', '"a1b22c333"', '"x.y.z"', '"  pad  "', '"ünï"', '"a\\nb"', '"<a href=\'x\'>&</a>"', '"{\\"k\\": 1}"']
PAT = ['"[0-9]+"', '"^a"', '"b+"', '"(\\\\w)(\\\\d)"', '"\\\\."', '"x*"', '"["', '"^$"', '"[a-z]+"', '"(?P<n>\\\\d)"']
VAL = ['1', '"s"', 'None', 'True', '[1, None, "b"]', '{b = 2, a = 1}', '{_p = 1, q = None, r = [1]}',
       '{"k": {"z": 1, "y": [True, 2.5]}}', '[]', '{}', '2.0', '"multi\\nline"', '"yes"', '"1"']
YAMLS = ['"a: 1\\nb: [1, 2]"', '"- 1\\n- x"', '"a: 1\\n---\\nb: 2"', '"bad: [1"', '""', '"x"', '"1.5"', '"k: {c: null}"', '"a: 1\\na: 2"']
JSONS = ['"{\\"a\\": 1}"', '"[1, 2.5, null]"', '"bad"', '"1"', '"\\"s\\""', '"{\\"a\\": {\\"b\\": []}}"', '""']
B64 = ['"aGVsbG8="', '"YWJj"', '"!!"', '""', '"aGVsbG8"']
TMPL = ['"{{name}}"', '"{{#if ok}}yes{{else}}no{{/if}}"', '"{{#each items}}<{{this}}>{{/each}}"', '"{{ missing }}"', '"{{{raw}}}"', '"plain"', '"{{name}"']
DATA = ['{name = "kcl"}', '{ok = True}', '{ok = False}', '{items = [1, "two", 3]}', '{raw = "<b>"}', '{}', '{name = "<i>"}']
FMT = ['"%Y-%m-%d"', '"%H:%M"', '"%Y-%m-%dT%H:%M:%S"', '"%d/%m/%Y"']
DATES = ['"2024-02-29"', '"2023-02-29"', '"12:30"', '"2024-01-01T10:00:00"', '"01/12/2024"', '"x"']
SEPS = ['"---"', '"\\n"', '"==="']
ENC = ['"utf-8"', '"UTF-8"', '"latin-1"', '"ascii"', '"nope"']

def pick(r, pool):
    # now and then a value of another kind
    return r.choice(VAL + NUM[:3]) if r.random() < 0.08 else r.choice(pool)

def call(r):
    m = r.choice(['math', 'math', 'units', 'net', 'net', 'regex', 'regex', 'base64', 'json', 'yaml', 'yaml',
                  'manifests', 'template', 'crypto', 'datetime', 'file'])
    if m == 'math':
        f = r.choice(['ceil', 'floor', 'exp', 'expm1', 'log1p', 'log10', 'sqrt', 'log2', 'log', 'pow', 'factorial',
                      'gcd', 'isfinite', 'isinf', 'isnan', 'modf'])
        if f in ('pow',): args = [pick(r, NUM), pick(r, NUM)]
        elif f == 'gcd': args = [pick(r, INT), pick(r, INT)]
        elif f == 'factorial': args = [pick(r, INT)]
        elif f == 'log': args = [pick(r, NUM)] + ([pick(r, NUM)] if r.random() < 0.5 else [])
        else: args = [pick(r, NUM)]
    elif m == 'units':
        f = r.choice(['to_n', 'to_u', 'to_m', 'to_K', 'to_M', 'to_G', 'to_T', 'to_P', 'to_Ki', 'to_Mi', 'to_Gi', 'to_Ti', 'to_Pi'])
        args = [pick(r, NUM + ['1024', '1048576', '1500000', '999'])]
    elif m == 'net':
        f = r.choice(['split_host_port', 'join_host_port', 'fqdn', 'parse_IP', 'to_IP4', 'to_IP6', 'IP_string', 'is_IPv4',
                      'is_IPv6', 'is_IP', 'is_loopback_IP', 'is_multicast_IP', 'is_interface_local_multicast_IP',
                      'is_link_local_multicast_IP', 'is_link_local_unicast_IP', 'is_global_unicast_IP', 'is_unspecified_IP',
                      'parse_CIDR', 'is_IP_in_CIDR', 'CIDR_host', 'CIDR_netmask', 'CIDR_subnet', 'CIDR_subnets'])
        if f == 'split_host_port': args = [pick(r, HOSTPORT)]
        elif f == 'join_host_port': args = [pick(r, ['"h"', '"::1"', '"1.2.3.4"', '"example.com"']), pick(r, ['80', '"443"', '0'])]
        elif f == 'fqdn': args = [] if r.random() < 0.3 else [pick(r, ['"example"', '"a.b"', '""'])]
        elif f == 'parse_CIDR' or f == 'CIDR_netmask': args = [pick(r, CIDR)]
        elif f == 'is_IP_in_CIDR': args = [pick(r, IP), pick(r, CIDR)]
        elif f == 'CIDR_host': args = [pick(r, CIDR), pick(r, ['0', '1', '5', '-1', '300'])]
        elif f == 'CIDR_subnet': args = [pick(r, CIDR), pick(r, ['1', '2', '8']), pick(r, ['0', '1', '3'])]
        elif f == 'CIDR_subnets': args = [pick(r, CIDR), pick(r, ['[1, 2]', '[8, 8]', '[1]', '[]'])]
        else: args = [pick(r, IP)]
    elif m == 'regex':
        f = r.choice(['match', 'search', 'replace', 'split', 'findall', 'compile'])
        if f == 'compile': args = [pick(r, PAT)]
        elif f == 'replace': args = [pick(r, STR), pick(r, PAT), pick(r, ['"-"', '""', '"\\\\1"'])] + ([pick(r, ['0', '1', '2'])] if r.random() < 0.4 else [])
        elif f == 'split': args = [pick(r, STR), pick(r, PAT)] + ([pick(r, ['0', '1', '2'])] if r.random() < 0.4 else [])
        else: args = [pick(r, STR), pick(r, PAT)]
    elif m == 'base64':
        f = r.choice(['encode', 'decode'])
        args = [pick(r, STR if f == 'encode' else B64)]
    elif m == 'json':
        f = r.choice(['encode', 'encode', 'decode', 'validate'])
        if f == 'encode':
            args = [pick(r, VAL)]
            for kw in ('sort_keys', 'indent', 'ignore_private', 'ignore_none'):
                if r.random() < 0.3: args.append(f"{kw}={r.choice(['True', 'False', '2', '0']) if kw == 'indent' else r.choice(['True', 'False'])}")
        else: args = [pick(r, JSONS)]
    elif m == 'yaml':
        f = r.choice(['encode', 'encode', 'encode_all', 'decode', 'decode_all', 'validate'])
        if f in ('encode', 'encode_all'):
            args = [pick(r, VAL) if f == 'encode' else '[' + ', '.join(r.choice(VAL) for _ in range(r.randint(0, 3))) + ']']
            for kw in ('sort_keys', 'ignore_private', 'ignore_none'):
                if r.random() < 0.3: args.append(f"{kw}={r.choice(['True', 'False'])}")
        else: args = [pick(r, YAMLS)]
    elif m == 'manifests':
        f = 'yaml_stream'
        args = ['[' + ', '.join(r.choice(VAL) for _ in range(r.randint(0, 3))) + ']']
        if r.random() < 0.5:
            opts = [f"{k} = {r.choice(['True', 'False'])}" for k in ('sort_keys', 'ignore_private', 'ignore_none') if r.random() < 0.5]
            if r.random() < 0.3: opts.append('sep = ' + r.choice(SEPS))
            args.append('opts={' + ', '.join(opts) + '}')
    elif m == 'template':
        f = r.choice(['execute', 'execute', 'html_escape'])
        args = [pick(r, TMPL), pick(r, DATA)] if f == 'execute' else [pick(r, STR)]
        if f == 'execute' and r.random() < 0.2: args = args[:1]
    elif m == 'crypto':
        f = r.choice(['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'blake3'])
        args = [pick(r, STR)] + ([f'encoding={r.choice(ENC)}'] if r.random() < 0.3 else [])
    elif m == 'datetime':
        f = 'validate'
        args = [pick(r, DATES), pick(r, FMT)]
    else:
        f = r.choice(['exists', 'read', 'abs', 'modpath', 'glob'])
        if f == 'glob': args = [pick(r, ['"*.k"', '"nothing*"', '"[a"'])]
        elif f == 'modpath': args = []
        else: args = [pick(r, ['"main.k"', '"missing.txt"', '""'])]
        if f in ('abs', 'modpath', 'glob'):
            return m, f'len(file.{f}({", ".join(args)})) > 0' if f != 'glob' else f'file.glob({", ".join(args)})'
    if r.random() < 0.05 and args: args = args[:-1]
    return m, f'{m}.{f}({", ".join(args)})'

out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    mods, lines = set(), []
    for i in range(r.randint(1, 3)):
        m, e = call(r)
        mods.add(m)
        lines.append(f'v{i} = {e}')
    out.append(''.join(f'import {m}\n' for m in sorted(mods)) + '\n'.join(lines) + '\n')
print("#---\n".join(out))
