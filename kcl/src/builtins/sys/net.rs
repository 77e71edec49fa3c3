//! The `net` module: IP addresses and host:port pairs, with upstream's (Go's) rules.

use std::net::IpAddr;

use super::{A, K, R};
use crate::builtins::{arg, req, str_arg};
use crate::value::{self, Host, RtError, RtResult, Value};

fn ip(a: A, k: K, f: &str) -> RtResult<Option<IpAddr>> {
    Ok(str_arg(a, k, 0, "ip", f)?.parse::<IpAddr>().ok())
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

pub(super) fn net(name: &str) -> Option<Value> {
    natives!(name, {
        "split_host_port" => |_: &mut dyn Host, a: A, k: K| -> R {
            let s = str_arg(a, k, 0, "ip_end_point", "split_host_port")?;
            let (h, p) = split_host_port(&s)
                .map_err(|why| RtError::eval(format!("ip_end_point \"{s}\" {why}")))?;
            Ok(Value::from(vec![Value::from(h), Value::from(p)]))
        },
        "join_host_port" => |_: &mut dyn Host, a: A, k: K| -> R {
            let h = value::to_str(req(a, k, 0, "host", "join_host_port")?);
            let p = value::to_str(req(a, k, 1, "port", "join_host_port")?);
            Ok(Value::from(if h.contains(':') { format!("[{h}]:{p}") } else { format!("{h}:{p}") }))
        },
        "fqdn" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(arg(a, k, 0, "name").cloned().unwrap_or(Value::str(""))) },
        "parse_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(ip(a, k, "parse_IP")?.map(|i| Value::from(i.to_string())).unwrap_or(Value::str(""))) },
        "to_IP4" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(match ip(a, k, "to_IP4")? { Some(IpAddr::V4(v)) => Value::from(v.to_string()), Some(IpAddr::V6(v)) => v.to_ipv4_mapped().map(|x| Value::from(x.to_string())).unwrap_or(Value::str("")), None => Value::str("") }) },
        "to_IP6" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(match ip(a, k, "to_IP6")? { Some(IpAddr::V4(v)) => Value::from(v.to_ipv6_mapped().to_string()), Some(IpAddr::V6(v)) => Value::from(v.to_string()), None => Value::str("") }) },
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
        "is_unspecified_IP" => |_: &mut dyn Host, a: A, k: K| -> R { Ok(Value::Bool(ip(a, k, "x")?.is_some_and(|i| i.is_unspecified()))) },
    })
}
