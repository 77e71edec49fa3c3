//! The `net` module: IP addresses and host:port pairs, with upstream's (Go's) rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use cidr::IpCidr;

use super::int_arg;
use super::{A, K, R};
use crate::builtins::text_arg;
use crate::builtins::{arg, req};
use crate::value::{self, Host, RtError, RtResult, Str, Value};

fn ip(a: A, k: K, f: &str) -> RtResult<Option<IpAddr>> {
    Ok(text_arg(a, k, 0, "ip", f)?.parse::<IpAddr>().ok())
}

/// Upstream's globally routable IPv4: no private, shared, documentation, benchmarking or
/// reserved range.
fn v4_global(v: std::net::Ipv4Addr) -> bool {
    let o = v.octets();
    !(v.is_private()
        || v.is_loopback()
        || v.is_link_local()
        || v.is_broadcast()
        || v.is_documentation()
        || v.is_unspecified()
        || v.is_multicast()
        || (o[0] == 100 && o[1] & 0xc0 == 64)
        || (o[0] == 198 && o[1] & 0xfe == 18)
        || o[0] >= 240
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        || o[0] == 0)
}

/// Go's `net.SplitHostPort` (upstream's), with its reasons for refusing an address.
fn split_host_port(s: &str) -> Result<(String, String), &'static str> {
    let i = s.rfind(':').ok_or("missing port")?;
    let (host, j, k) = if s.starts_with('[') {
        let end = s.find(']').ok_or("missing ']'")?;
        if end + 1 == s.len() {
            return Err("missing port");
        }
        if end + 1 != i {
            return Err(if s.as_bytes()[end + 1] == b':' {
                "too many colons"
            } else {
                "missing port"
            });
        }
        (&s[1..end], 1, end + 1)
    } else {
        let host = &s[..i];
        if host.contains(':') {
            return Err("too many colons");
        }
        (host, 0, 0)
    };
    if s[j..].contains('[') {
        return Err("unexpected '['");
    }
    if s[k..].contains(']') {
        return Err("unexpected ']'");
    }
    Ok((host.to_string(), s[i + 1..].to_string()))
}

/// A network as upstream parses it (an address alone is its own /32 or /128), or upstream's
/// panic message `{f}() invalid cidr: ...`.
fn cidr_arg(a: A, k: K, f: &str) -> RtResult<IpCidr> {
    let s = value::to_str(req(a, k, 0, "cidr", f)?);
    IpCidr::from_str(&s).map_err(|e| RtError::eval(format!("{f}() invalid cidr: {e}")))
}

/// Subnet `net_num` of `additional_bits` more bits inside `cidr` (Terraform's `cidrsubnet`, as
/// upstream computes it), or the reason it does not fit.
fn cidr_allocate(cidr: IpCidr, additional_bits: i64, net_num: i64) -> Result<String, String> {
    let len = cidr.network_length() as i64 + additional_bits;
    let too_long = |family: &str| {
        format!(
            "invalid additional_bits: would extend network length to {len} bits, which is too long for {family}"
        )
    };
    let no_room = || {
        format!("additional_bits of {additional_bits} does not accommodate a net_num of {net_num}")
    };
    match cidr.first_address() {
        IpAddr::V4(v4) => {
            if len > 32 {
                return Err(too_long("IPv4"));
            }
            if net_num >= (1i64 << additional_bits) {
                return Err(no_room());
            }
            let bits = u32::from(v4).wrapping_add((net_num << (32 - len)) as u32);
            Ok(format!("{}/{len}", Ipv4Addr::from(bits)))
        }
        IpAddr::V6(v6) => {
            if len > 128 {
                return Err(too_long("IPv6"));
            }
            if additional_bits < 64 && net_num as u64 >= (1u64 << additional_bits) {
                return Err(no_room());
            }
            if len == 0 {
                return Ok("::/0".to_string());
            }
            let bits = u128::from(v6).wrapping_add((net_num as u128) << (128 - len));
            Ok(format!("{}/{len}", Ipv6Addr::from(bits)))
        }
    }
}

/// Upstream's `CIDR_subnets`: consecutive subnets of the given extra bits, each placed after
/// every earlier one (its allocation loop, step for step).
fn cidr_subnets(cidr: IpCidr, bits_list: &[i64]) -> RtResult<Vec<Value>> {
    let f = "CIDR_subnets()";
    let mut nums: Vec<i64> = Vec::with_capacity(bits_list.len());
    for &bits in bits_list {
        if bits < 0 {
            return Err(RtError::eval(format!(
                "{f} invalid additional_bits: cannot be negative"
            )));
        }
        let new_bits = cidr.network_length() as i64 + bits;
        if cidr.is_ipv4() && new_bits > 32 {
            return Err(RtError::eval(format!(
                "{f} invalid additional_bits: would extend network length to {new_bits} bits, which is too long for IPv4"
            )));
        }
        if cidr.is_ipv6() {
            if bits > 63 {
                return Err(RtError::eval(format!(
                    "{f} invalid additional_bits: cannot extend more than 63 bits"
                )));
            }
            if new_bits > 128 {
                return Err(RtError::eval(format!(
                    "{f} invalid additional_bits: would extend network length to {new_bits} bits, which is too long for IPv6"
                )));
            }
        }
        let mut num = 0i64;
        let mut again = true;
        while again {
            again = false;
            for (i, &taken) in nums.iter().enumerate() {
                let (mut taken, mut taken_bits) = (taken, bits_list[i]);
                if taken_bits > bits {
                    taken >>= taken_bits - bits;
                    taken_bits = bits;
                }
                if taken_bits < bits {
                    taken <<= bits - taken_bits;
                }
                if taken == num {
                    num = num.wrapping_add(1i64 << (bits - taken_bits));
                    again = true;
                }
            }
        }
        nums.push(num);
    }
    let mut subnets: Vec<Value> = Vec::with_capacity(nums.len());
    for (&bits, &num) in bits_list.iter().zip(&nums) {
        if num as u64 >= (1u64 << bits) {
            let last = subnets.pop().map(|v| value::to_str(&v)).unwrap_or_default();
            return Err(RtError::eval(format!(
                "{f} not enough remaining address space for a subnet with a prefix of {} bits after {last}",
                cidr.network_length() as i64 + bits
            )));
        }
        let subnet = cidr_allocate(cidr, bits, num)
            .map_err(|why| RtError::eval(format!("CIDR_subnets {why}")))?;
        subnets.push(Value::from(subnet));
    }
    Ok(subnets)
}

pub(super) fn net(name: &str) -> Option<Value> {
    natives!(name, {
        "split_host_port" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "ip_end_point", "split_host_port")?;
            let (h, p) = split_host_port(&s)
                .map_err(|why| RtError::eval(format!("ip_end_point \"{}\" {why}", s.escape_default())))?;
            Ok(Value::from(vec![Value::from(h), Value::from(p)]))
        },
        "join_host_port" => |_: &mut dyn Host, a: A, k: K| -> R {
            let h = value::to_str(req(a, k, 0, "host", "join_host_port")?);
            let p = value::to_str(req(a, k, 1, "port", "join_host_port")?);
            Ok(Value::from(if h.contains(':') { format!("[{h}]:{p}") } else { format!("{h}:{p}") }))
        },
        "fqdn" => |_: &mut dyn Host, a: A, k: K| -> R {
            let name = match arg(a, k, 0, "name") {
                Some(Value::Str(s)) if !s.is_empty() => s.to_string(),
                _ => dns_lookup::get_hostname().unwrap_or_default(),
            };
            Ok(Value::from(fqdn(name)))
        },
        "parse_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(ip(a, k, "parse_IP")?.map(|i| Value::from(i.to_string())).unwrap_or(Value::str(""))) },
        // upstream's conversions answer a failure with its reason, as the value
        "to_IP4" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "ip", "to_IP4")?;
            Ok(Value::from(match (Ipv4Addr::from_str(&s), Ipv6Addr::from_str(&s)) {
                (Ok(v4), _) => v4.to_string(),
                (_, Ok(v6)) => match v6.to_ipv4() {
                    Some(v4) => v4.to_string(),
                    None => format!("can not parse {s} ipv6 to ipv4!"),
                },
                (_, Err(e)) => format!("can not both parse {s} to ipv6 and ipv4,err:{e}"),
            }))
        },
        "to_IP6" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = text_arg(a, k, 0, "ip", "to_IP6")?;
            Ok(Value::from(match (Ipv6Addr::from_str(&s), Ipv4Addr::from_str(&s)) {
                (Ok(v6), _) => v6.to_string(),
                (_, Ok(v4)) => v4.to_ipv6_mapped().to_string(),
                (_, Err(e)) => format!("can not both parse {s} to ipv6 and ipv4,err:{e}"),
            }))
        },
        "IP_string" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(ip(a, k, "IP_string")?.map(|i| Value::from(i.to_string())).unwrap_or(Value::str(""))) },
        "is_IPv4" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(matches!(ip(a, k, "is_IPv4")?, Some(IpAddr::V4(_))))) },
        "is_IPv6" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(matches!(ip(a, k, "is_IPv6")?, Some(IpAddr::V6(_))))) },
        "is_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "is_IP")?.is_some())) },
        "is_loopback_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "is_loopback_IP")?.is_some_and(|i| i.is_loopback()))) },
        "is_multicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "is_multicast_IP")?.is_some_and(|i| i.is_multicast()))) },
        "is_interface_local_multicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(matches!(ip(a, k, "x")?, Some(IpAddr::V6(v)) if v.segments()[0] & 0xff0f == 0xff01))) },
        "is_link_local_multicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Bool(match ip(a, k, "x")? {
                Some(IpAddr::V4(v)) => v.octets()[0] == 224 && v.octets()[1] == 0 && v.octets()[2] == 0,
                Some(IpAddr::V6(v)) => v.segments()[0] & 0xff0f == 0xff02,
                None => false,
            }))
        },
        "is_link_local_unicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Bool(match ip(a, k, "x")? {
                Some(IpAddr::V4(v)) => v.is_link_local(),
                Some(IpAddr::V6(v)) => v.segments()[0] & 0xffc0 == 0xfe80,
                None => false,
            }))
        },
        "is_global_unicast_IP" => |_: &mut dyn Host, a: A, k: K| -> R {
            Ok(Value::Bool(match ip(a, k, "x")? {
                // upstream's: a globally routable address (no private, shared, documentation,
                // benchmarking or reserved range); for IPv6 the 2000::/3 unicast block but its
                // documentation prefix
                Some(IpAddr::V4(v)) => v4_global(v),
                Some(IpAddr::V6(v)) => {
                    let s = v.segments();
                    // a NAT64 address (64:ff9b::/96) is as global as the IPv4 it holds
                    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                        let [a, b, c, d] = [s[6] >> 8, s[6] & 0xff, s[7] >> 8, s[7] & 0xff];
                        v4_global(std::net::Ipv4Addr::new(a as u8, b as u8, c as u8, d as u8))
                    } else {
                        s[0] & 0xe000 == 0x2000 && !(s[0] == 0x2001 && s[1] == 0x0db8)
                    }
                }
                None => false,
            }))
        },
        "parse_CIDR" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = value::to_str(req(a, k, 0, "cidr", "parse_CIDR")?);
            let mut d = value::Dict::default();
            if let Ok(c) = IpCidr::from_str(&s) {
                d.map.insert(Str::from("ip"), Value::from(c.first_address().to_string()));
                d.map.insert(Str::from("mask"), Value::Int(c.network_length() as i64));
            }
            Ok(Value::from(d))
        },
        "is_IP_in_CIDR" => |_: &mut dyn Host, a: A, k: K| -> R {
            let f = "is_IP_in_CIDR";
            let ip = text_arg(a, k, 0, "ip", f)?;
            let ip = IpAddr::from_str(&ip).map_err(|e| RtError::eval(format!("{f}() invalid ip: {e}")))?;
            let c = value::to_str(req(a, k, 1, "cidr", f)?);
            let c = IpCidr::from_str(&c).map_err(|e| RtError::eval(format!("{f}() invalid cidr: {e}")))?;
            let ip = match ip {
                IpAddr::V4(v4) if c.is_ipv6() => IpAddr::V6(v4.to_ipv6_mapped()),
                ip => ip,
            };
            Ok(Value::Bool(c.contains(&ip)))
        },
        "CIDR_host" => |_: &mut dyn Host, a: A, k: K| -> R {
            let c = cidr_arg(a, k, "CIDR_host")?;
            let n = int_arg(a, k, 1, "host_num", "CIDR_host")?;
            let host_len = c.family().len() - c.network_length();
            let magnitude = if n < 0 { -(n + 1) } else { n } as u64;
            if host_len < 64 && (1u64 << host_len) <= magnitude {
                return Err(RtError::eval(format!(
                    "CIDR_host() prefix of {} does not accommodate a host numbered {n}",
                    c.network_length()
                )));
            }
            Ok(Value::from(match c.first_address() {
                IpAddr::V4(v4) => {
                    let mut bits = u32::from(v4) as i64;
                    if n < 0 {
                        bits += 1i64 << host_len;
                    }
                    Ipv4Addr::from(bits.wrapping_add(n) as u32).to_string()
                }
                IpAddr::V6(v6) => {
                    let bits = if host_len == 128 {
                        n as u128
                    } else {
                        let host = if n < 0 { (1u128 << host_len).wrapping_sub((-(n as i128)) as u128) } else { n as u128 };
                        u128::from(v6).wrapping_add(host)
                    };
                    Ipv6Addr::from(bits).to_string()
                }
            }))
        },
        "CIDR_netmask" => |_: &mut dyn Host, a: A, k: K| -> R {
            let c = cidr_arg(a, k, "CIDR_netmask")?;
            if c.is_ipv6() {
                return Err(RtError::eval("CIDR_netmask() IPv6 addresses cannot have a netmask"));
            }
            let bits = (-1i64 << (32 - c.network_length() as i64)) as u32;
            Ok(Value::from(Ipv4Addr::from(bits).to_string()))
        },
        "CIDR_subnet" => |_: &mut dyn Host, a: A, k: K| -> R {
            let f = "CIDR_subnet";
            let c = cidr_arg(a, k, f)?;
            let bits = int_arg(a, k, 1, "additional_bits", f)?;
            if bits < 0 {
                return Err(RtError::eval(format!("{f}() invalid additional_bits: cannot be negative")));
            }
            let num = int_arg(a, k, 2, "net_num", f)?;
            if num < 0 {
                return Err(RtError::eval(format!("{f}() invalid net_num: cannot be negative")));
            }
            cidr_allocate(c, bits, num)
                .map(Value::from)
                .map_err(|why| RtError::eval(format!("{f}() {why}")))
        },
        "CIDR_subnets" => |_: &mut dyn Host, a: A, k: K| -> R {
            let f = "CIDR_subnets";
            let c = cidr_arg(a, k, f)?;
            let bits = match req(a, k, 1, "additional_bits", f)? {
                Value::List(l) => l
                    .iter()
                    .map(|v| match v {
                        Value::Int(n) => Ok(*n),
                        Value::Bool(b) => Ok(*b as i64),
                        other => Err(RtError::ty(format!(
                            "{f}() additional_bits must be a list of int, not {}",
                            other.type_name()
                        ))),
                    })
                    .collect::<RtResult<Vec<i64>>>()?,
                _ => return Err(RtError::eval("invalid list value")),
            };
            Ok(Value::from(cidr_subnets(c, &bits)?))
        },
        "is_unspecified_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "x")?.is_some_and(|i| i.is_unspecified()))) },
    })
}

/// As upstream's: the name of the first address the name resolves to, else the name itself.
fn fqdn(name: String) -> String {
    let first = dns_lookup::lookup_host(&name)
        .ok()
        .and_then(|addrs| addrs.into_iter().next());
    first
        .and_then(|ip| dns_lookup::lookup_addr(&ip).ok())
        .unwrap_or(name)
}
