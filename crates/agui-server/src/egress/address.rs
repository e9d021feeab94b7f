//! Which addresses the egress proxy reaches: public unicast only, IPv6 forms that carry an IPv4
//! address judged by that address; and the hosts written as numbers, read as the address they
//! name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is a public unicast address (not loopback, private, link-local — the cloud
/// metadata address among them —, shared, multicast, documentation or otherwise reserved). An
/// IPv6 address that carries IPv4 addresses ([`carried_v4`]) is public only if each of them is.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => match carried_v4(ip) {
            Carried::StandsFor(v4) => is_public_v4(v4),
            Carried::Through(v4s) => is_public_v6(ip) && v4s.into_iter().all(is_public_v4),
            Carried::Nothing => is_public_v6(ip),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

/// Whether `ip`, an IPv6 address that carries no IPv4 address, is public: global unicast
/// (`2000::/3`), less documentation (`2001:db8::/32`, `3fff::/20`), benchmarking
/// (`2001:2::/48`), ORCHID (`2001:10::/28`, `2001:20::/28`) and the local-use NAT64 prefix
/// (`64:ff9b:1::/48`, outside `2000::/3` anyway: where it puts the IPv4 address is the
/// network's choice, so what it reaches cannot be told). Loopback, unspecified, link-local,
/// site-local, unique local and multicast addresses are all outside `2000::/3`.
fn is_public_v6(ip: Ipv6Addr) -> bool {
    let [s0, s1, s2, ..] = ip.segments();
    (s0 & 0xe000) == 0x2000
        && !(s0 == 0x2001 && s1 == 0x0db8
            || (s0 & 0xfff0) == 0x3ff0
            || s0 == 0x2001 && s1 == 0x0002 && s2 == 0
            || s0 == 0x2001 && (s1 & 0xfff0) == 0x0010
            || s0 == 0x2001 && (s1 & 0xfff0) == 0x0020)
}

/// How an IPv6 address carries IPv4 addresses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Carried {
    /// It is an IPv4 address written as IPv6, what a connection to it reaches:
    /// IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d` (`::/96`, so `::` and `::1`
    /// too), IPv4-translated `::ffff:0:a.b.c.d` (SIIT, RFC 6145), NAT64's well-known prefix
    /// `64:ff9b::a.b.c.d` (RFC 6052).
    StandsFor(Ipv4Addr),
    /// It is an IPv6 address delivered through or to these IPv4 hosts: 6to4
    /// `2002:AABB:CCDD::/48` (RFC 3056: the router `AA.BB.CC.DD`); Teredo
    /// `2001:0:SSSS:SSSS:…:CCCC:CCCC` (RFC 4380: the server `SSSS:SSSS`, and the client,
    /// `CCCC:CCCC` with every bit inverted); an ISATAP interface identifier
    /// `…:0:5efe:a.b.c.d` or `…:200:5efe:a.b.c.d` on any prefix (RFC 5214).
    Through(Vec<Ipv4Addr>),
    /// None of these forms.
    Nothing,
}

/// The IPv4 addresses `ip` carries.
pub(crate) fn carried_v4(ip: Ipv6Addr) -> Carried {
    let bits = u128::from(ip);
    // The 32 bits from bit `at` (0: the most significant).
    let v4_at = |at: u32| Ipv4Addr::from((bits >> (96 - at)) as u32);
    let s = ip.segments();
    let isatap = ((s[4] & 0xfcff) == 0 && s[5] == 0x5efe).then(|| v4_at(96));
    match s {
        [0, 0, 0, 0, 0, 0xffff | 0, ..]
        | [0, 0, 0, 0, 0xffff, 0, ..]
        | [0x64, 0xff9b, 0, 0, 0, 0, ..] => Carried::StandsFor(v4_at(96)),
        [0x2002, ..] => Carried::Through([Some(v4_at(16)), isatap].into_iter().flatten().collect()),
        [0x2001, 0, ..] => Carried::Through(vec![v4_at(32), Ipv4Addr::from(!(bits as u32))]),
        _ => isatap.map_or(Carried::Nothing, |v4| Carried::Through(vec![v4])),
    }
}

/// The IPv4 address a host written as a number names, the way URL parsers and `inet_aton` read
/// it: one to four parts separated by dots, each decimal, octal (a leading `0`) or hexadecimal
/// (`0x`), the last filling the bytes the others leave (`127.1`, `0x7f.1`, `2130706433`,
/// `0177.0.0.01`), a trailing dot allowed. `None` when its last part is not a number (a name);
/// an error when it is a number but not an address.
pub(crate) fn ipv4_number(host: &str) -> Result<Option<Ipv4Addr>, String> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts: Vec<&str> = host.split('.').collect();
    let last = parts.last().copied().unwrap_or_default();
    if last.is_empty() || number(last).is_none() {
        return Ok(None);
    }
    let invalid = || format!("`{host}` is not an IPv4 address");
    if parts.len() > 4 {
        return Err(invalid());
    }
    let numbers = parts
        .iter()
        .map(|part| number(part).ok_or_else(invalid))
        .collect::<Result<Vec<u64>, _>>()?;
    let (last, first) = numbers.split_last().ok_or_else(invalid)?;
    if first.iter().any(|&n| n > 255) || *last >= 1u64 << (8 * (5 - numbers.len())) {
        return Err(invalid());
    }
    let value = first
        .iter()
        .enumerate()
        .fold(*last, |value, (i, &n)| value | n << (8 * (3 - i)));
    Ok(Some(Ipv4Addr::from(value as u32)))
}

/// A part of a numeric host: decimal, octal (leading `0`) or hexadecimal (`0x`); `None` if it
/// is none of these, or too large to be part of an address.
fn number(part: &str) -> Option<u64> {
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        // `0x` alone is zero, as URL parsers read it.
        return (radix == 16).then_some(0);
    }
    if digits.len() > 12 || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn addresses_are_judged_by_the_ipv4_address_they_carry() {
        for (address, public) in [
            // IPv4.
            ("8.8.8.8", true),
            ("142.250.1.1", true),
            ("127.0.0.1", false),
            ("10.1.2.3", false),
            ("172.16.0.1", false),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("0.0.0.0", false),
            ("255.255.255.255", false),
            ("192.0.2.1", false),
            ("224.0.0.1", false),
            // IPv6 of its own.
            ("2606:4700::1111", true),
            ("2a00:1450:4001:81b::200e", true),
            ("::1", false),
            ("::", false),
            ("fe80::1", false),
            ("fec0::1", false),
            ("fd00::1", false),
            ("fd00:ec2::254", false),
            ("ff02::1", false),
            ("2001:db8::1", false),
            ("3fff::1", false),
            ("2001:2::1", false),
            ("2001:10::1", false),
            ("100::1", false),
            ("64:ff9b:1::7f00:1", false),
            ("64:ff9b:1::808:808", false),
            ("64::1", false),
            // IPv4-mapped.
            ("::ffff:127.0.0.1", false),
            ("::ffff:169.254.169.254", false),
            ("::ffff:8.8.8.8", true),
            // IPv4-compatible.
            ("::127.0.0.1", false),
            ("::10.0.0.1", false),
            ("::8.8.8.8", true),
            // IPv4-translated.
            ("::ffff:0:7f00:1", false),
            ("::ffff:0:a9fe:a9fe", false),
            ("::ffff:0:8.8.8.8", true),
            // NAT64, well-known prefix.
            ("64:ff9b::127.0.0.1", false),
            ("64:ff9b::169.254.169.254", false),
            ("64:ff9b::8.8.8.8", true),
            // 6to4.
            ("2002:7f00:1::1", false),
            ("2002:a9fe:a9fe::", false),
            ("2002:c0a8:101:1::1", false),
            ("2002:808:808::1", true),
            // Teredo: server 65.54.227.120 or 127.0.0.1; client 8.8.8.8 (f7f7:f7f7) or
            // 127.0.0.1 (80ff:fffe).
            ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", true),
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", false),
            ("2001:0:7f00:1:8000:63bf:f7f7:f7f7", false),
            // ISATAP interface identifiers.
            ("2001:4860:0:1::5efe:7f00:1", false),
            ("2001:4860:0:1:200:5efe:a9fe:a9fe", false),
            ("2001:4860:0:1:200:5efe:808:808", true),
            ("fe80::5efe:808:808", false),
            ("2002:808:808:1:0:5efe:7f00:1", false),
        ] {
            let ip: IpAddr = address.parse().unwrap();
            assert_eq!(is_public(ip), public, "{address}");
        }
    }

    #[test]
    fn hosts_written_as_numbers_are_the_addresses_they_name() {
        for (host, read) in [
            ("2130706433", Ok(Some("127.0.0.1"))),
            ("0x7f000001", Ok(Some("127.0.0.1"))),
            ("0x7f.1", Ok(Some("127.0.0.1"))),
            ("127.1", Ok(Some("127.0.0.1"))),
            ("127.0.1", Ok(Some("127.0.0.1"))),
            ("0177.0.0.01", Ok(Some("127.0.0.1"))),
            ("017700000001", Ok(Some("127.0.0.1"))),
            ("127.0.0.1.", Ok(Some("127.0.0.1"))),
            ("0xA9.0xFE.0xA9.0xFE", Ok(Some("169.254.169.254"))),
            ("0", Ok(Some("0.0.0.0"))),
            ("8.8.8.8", Ok(Some("8.8.8.8"))),
            ("example.com", Ok(None)),
            ("1.2.3.example", Ok(None)),
            ("0x7g", Ok(None)),
            ("example.com.", Ok(None)),
            ("256.0.0.1", Err(())),
            ("1.2.3.4.5", Err(())),
            ("4294967296", Err(())),
            ("example.0x7f", Err(())),
            ("1..1", Err(())),
            ("08.1", Err(())),
        ] {
            let got = ipv4_number(host)
                .map(|ip| ip.map(|ip| ip.to_string()))
                .map_err(|_| ());
            assert_eq!(got, read.map(|ip| ip.map(str::to_owned)), "{host}");
        }
    }

    /// Every IPv6 form that carries `v4`, as an attacker would write it for a target `v4`.
    fn embeddings(v4: Ipv4Addr) -> Vec<Ipv6Addr> {
        let n = u128::from(u32::from(v4));
        let public_v4 = u128::from(u32::from(Ipv4Addr::new(8, 8, 8, 8)));
        let public_prefix = 0x2001_4860_0000_0001u128 << 64;
        vec![
            v4.to_ipv6_mapped(),
            v4.to_ipv6_compatible(),
            Ipv6Addr::from(0xffff_0000_0000u128 | n),
            Ipv6Addr::from(0x0064_ff9b_u128 << 96 | n),
            Ipv6Addr::from(0x2002_u128 << 112 | n << 80 | 1),
            // Teredo: as the client (bits inverted) behind a public server, and as the server
            // of a public client.
            Ipv6Addr::from(0x2001_0000_u128 << 96 | public_v4 << 64 | (!n & 0xffff_ffff)),
            Ipv6Addr::from(0x2001_0000_u128 << 96 | n << 64 | (!public_v4 & 0xffff_ffff)),
            Ipv6Addr::from(public_prefix | 0x5efe_u128 << 32 | n),
            Ipv6Addr::from(public_prefix | 0x0200_5efe_u128 << 32 | n),
        ]
    }

    proptest! {
        #[test]
        fn each_ipv6_form_of_an_ipv4_address_is_judged_as_that_address(v4 in any::<u32>()) {
            let v4 = Ipv4Addr::from(v4);
            let expected = is_public_v4(v4);
            for v6 in embeddings(v4) {
                prop_assert_eq!(is_public(IpAddr::V6(v6)), expected, "{} carrying {}", v6, v4);
            }
        }

        #[test]
        fn a_number_is_read_as_the_address_it_names(v4 in any::<u32>()) {
            let ip = Ipv4Addr::from(v4);
            let [a, b, c, d] = ip.octets();
            for written in [
                v4.to_string(),
                format!("{v4:#x}"),
                format!("0{v4:o}"),
                format!("{a}.{}", v4 & 0xff_ffff),
                format!("{a}.{b}.{}", v4 & 0xffff),
                format!("{a:#x}.0{b:o}.{c}.{d:#x}."),
            ] {
                prop_assert_eq!(ipv4_number(&written), Ok(Some(ip)), "{}", written);
            }
        }
    }
}
