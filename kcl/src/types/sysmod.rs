//! The signatures upstream's resolver gives the functions of the system modules: their
//! calls are checked like a known lambda's (argument counts, keywords, argument types) and
//! their values have the declared return type. `name?` marks a parameter with a default.

use std::rc::Rc;

use super::ty::{FuncTy, Ty};
use crate::ast::Symbol;

const SIGNATURES: &[&str] = &[
    "base64.encode(value: str, encoding?: str) -> str",
    "base64.decode(value: str) -> str",
    "base32.encode(value: str) -> str",
    "base32.decode(value: str) -> str",
    "net.split_host_port(ip_end_point: str) -> [str]",
    "net.join_host_port(host: str, port: int|str) -> str",
    "net.fqdn(name?: str) -> str",
    "net.parse_IP(ip: str) -> str",
    "net.IP_string(ip: str) -> str",
    "net.to_IP4(ip: str) -> str",
    "net.to_IP6(ip: str) -> str",
    "net.is_IPv4(ip: str) -> bool",
    "net.is_IPv6(ip: str) -> bool",
    "net.is_IP(ip: str) -> bool",
    "net.is_loopback_IP(ip: str) -> bool",
    "net.is_multicast_IP(ip: str) -> bool",
    "net.is_interface_local_multicast_IP(ip: str) -> bool",
    "net.is_link_local_multicast_IP(ip: str) -> bool",
    "net.is_link_local_unicast_IP(ip: str) -> bool",
    "net.is_global_unicast_IP(ip: str) -> bool",
    "net.is_unspecified_IP(ip: str) -> bool",
    "net.parse_CIDR(cidr: str) -> {str:any}",
    "net.is_IP_in_CIDR(ip: str, cidr: str) -> bool",
    "net.CIDR_host(cidr: str, host_num: int) -> str",
    "net.CIDR_netmask(cidr: str) -> str",
    "net.CIDR_subnet(cidr: str, additional_bits: int, net_num: int) -> str",
    "net.CIDR_subnets(cidr: str, additional_bits: [int]) -> [str]",
    "manifests.yaml_stream(values: any, opts?: {str:any}) -> any",
    "math.ceil(x: num) -> int",
    "math.factorial(x: num) -> int",
    "math.floor(x: num) -> int",
    "math.gcd(a: int, b: int) -> int",
    "math.isfinite(x: num) -> bool",
    "math.isinf(x: num) -> bool",
    "math.isnan(x: num) -> bool",
    "math.modf(x: num) -> [float]",
    "math.exp(x: num) -> float",
    "math.expm1(x: num) -> float",
    "math.log(x: num, e?: float) -> float",
    "math.log1p(x: num) -> float",
    "math.log2(x: num) -> float",
    "math.log10(x: num) -> float",
    "math.pow(x: num, y: num) -> float",
    "math.sqrt(x: num) -> float",
    "datetime.ticks() -> float",
    "datetime.date() -> str",
    "datetime.now(format?: str) -> str",
    "datetime.today() -> str",
    "datetime.validate(date: str, format: str) -> bool",
    "datetime.is_iso8601(date: str) -> bool",
    "datetime.is_rfc3339(date: str) -> bool",
    "regex.replace(string: str, pattern: str, replace: str, count?: int) -> str",
    "regex.match(string: str, pattern: str) -> bool",
    "regex.compile(pattern: str) -> bool",
    "regex.findall(string: str, pattern: str) -> [str]",
    "regex.search(string: str, pattern: str) -> bool",
    "regex.split(string: str, pattern: str, maxsplit?: int) -> [str]",
    "yaml.decode(value: str) -> any",
    "yaml.decode_all(value: str) -> [any]",
    "json.decode(value: str) -> any",
    "json.validate(value: str) -> bool",
    "yaml.validate(value: str) -> bool",
    "yaml.encode(data: any, sort_keys?: bool, ignore_private?: bool, ignore_none?: bool) -> str",
    "yaml.encode_all(data: [any], sort_keys?: bool, ignore_private?: bool, ignore_none?: bool) -> str",
    "yaml.dump_to_file(data: any, filename: str, sort_keys?: bool, ignore_private?: bool, ignore_none?: bool) -> str",
    "yaml.dump_all_to_file(data: [any], filename: str, sort_keys?: bool, ignore_private?: bool, ignore_none?: bool) -> str",
    "json.encode(data: any, sort_keys?: bool, indent?: int, ignore_private?: bool, ignore_none?: bool) -> str",
    "json.dump_to_file(data: any, filename: str, sort_keys?: bool, indent?: int, ignore_private?: bool, ignore_none?: bool) -> str",
    "json.merge(src: any, patch: any) -> any",
    "crypto.md5(value: str, encoding?: str) -> str",
    "crypto.sha1(value: str, encoding?: str) -> str",
    "crypto.sha224(value: str, encoding?: str) -> str",
    "crypto.sha256(value: str, encoding?: str) -> str",
    "crypto.sha384(value: str, encoding?: str) -> str",
    "crypto.sha512(value: str, encoding?: str) -> str",
    "crypto.blake3(value: str, encoding?: str) -> str",
    "crypto.uuid() -> str",
    "crypto.filesha256(filepath: str) -> str",
    "units.to_n(num: num) -> str",
    "units.to_u(num: num) -> str",
    "units.to_m(num: num) -> str",
    "units.to_K(num: num) -> str",
    "units.to_M(num: num) -> str",
    "units.to_G(num: num) -> str",
    "units.to_T(num: num) -> str",
    "units.to_P(num: num) -> str",
    "units.to_Ki(num: num) -> str",
    "units.to_Mi(num: num) -> str",
    "units.to_Gi(num: num) -> str",
    "units.to_Ti(num: num) -> str",
    "units.to_Pi(num: num) -> str",
    "collection.union_all(num: [any]) -> any",
    "file.read(filepath: str) -> str",
    "file.glob(pattern: str) -> [str]",
    "file.modpath() -> str",
    "file.workdir() -> str",
    "file.current() -> str",
    "file.exists(filepath: str) -> bool",
    "file.abs(filepath: str) -> str",
    "file.read_env(key: str) -> str",
    "file.size(filepath: str) -> int",
    "file.write(filepath: str, content: str) -> any",
    "file.append(filepath: str, content: str) -> any",
    "file.mkdir(directory: str, exists?: bool) -> any",
    "file.delete(filepath: str) -> any",
    "file.cp(src: str, dest: str) -> any",
    "file.mv(src: str, dest: str) -> any",
    "runtime.catch(func: () -> any) -> str",
    "template.execute(template: str, data?: {str:any}) -> str",
    "template.html_escape(data: str) -> str",
];

/// The signature of `module.name`, if upstream's resolver declares one.
/// The type upstream's resolver gives a system module's constant: every `units` multiplier is
/// an int (`units.m` too), and `units.NumberMultiplier` is the unit type.
pub(super) fn constant(module: &str, name: &str) -> Option<Ty> {
    match (module, name) {
        ("units", "NumberMultiplier") => Some(Ty::Unit(None)),
        ("units", "n" | "u" | "m" | "k" | "K" | "M" | "G" | "T" | "P")
        | ("units", "Ki" | "Mi" | "Gi" | "Ti" | "Pi") => Some(Ty::Int),
        _ => None,
    }
}

pub(super) fn signature(module: &str, name: &str) -> Option<Rc<FuncTy>> {
    let prefix = format!("{module}.{name}(");
    let line = SIGNATURES.iter().find(|l| l.starts_with(&prefix))?;
    let (params, ret) = line[prefix.len()..].rsplit_once(") -> ")?;
    let params = if params.is_empty() {
        Vec::new()
    } else {
        params
            .split(", ")
            .map(|p| {
                let (n, t) = p.split_once(": ").unwrap_or((p, "any"));
                let (n, default) = match n.strip_suffix('?') {
                    Some(n) => (n, true),
                    None => (n, false),
                };
                (Some(Symbol::intern(n)), parse_ty(t), default)
            })
            .collect()
    };
    Some(Rc::new(FuncTy {
        params,
        ret: parse_ty(ret),
        param_spans: Vec::new(),
    }))
}

/// A type as the signature tables write it (`str`, `[any]`, `{str:any}`, `a|b`, `num`).
pub(super) fn parse_ty(t: &str) -> Ty {
    if let Some(e) = t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return Ty::List(Rc::new(parse_ty(e)));
    }
    if let Some((k, v)) = t
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .and_then(|t| t.split_once(':'))
    {
        return Ty::Dict(Rc::new(parse_ty(k)), Rc::new(parse_ty(v)));
    }
    if t.contains('|') {
        return Ty::union(t.split('|').map(parse_ty).collect());
    }
    match t {
        "() -> any" => Ty::Func(Rc::new(FuncTy {
            params: Vec::new(),
            ret: Ty::Any,
            param_spans: Vec::new(),
        })),
        // (the function `reduce` takes; spaces removed)
        "(any,any)->any" => Ty::Func(Rc::new(FuncTy {
            params: vec![(None, Ty::Any, false), (None, Ty::Any, false)],
            ret: Ty::Any,
            param_spans: Vec::new(),
        })),
        "str" => Ty::Str,
        "int" => Ty::Int,
        "float" => Ty::Float,
        "bool" => Ty::Bool,
        "num" => Ty::union(vec![Ty::Int, Ty::Float]),
        _ => Ty::Any,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every declared signature parses and names a function the runtime has (a typo in the
    /// table would make the checker refuse a call the program may make).
    #[test]
    fn every_signature_has_a_runtime_function() {
        for line in SIGNATURES {
            let (qualified, _) = line.split_once('(').expect("name(");
            let (module, name) = qualified.split_once('.').expect("module.name");
            assert!(signature(module, name).is_some(), "{line}: does not parse");
            assert!(
                crate::builtins::system_member(module, name).is_some(),
                "{line}: no such runtime function"
            );
        }
    }

    #[test]
    fn a_function_type_parameter_reads_whole() {
        let f = signature("runtime", "catch").unwrap();
        assert_eq!(f.params.len(), 1);
        assert!(matches!(f.params[0].1, Ty::Func(_)));
        assert_eq!(f.ret, Ty::Str);
    }
}
