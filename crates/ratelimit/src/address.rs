//! Quotas per client address for a public app: the key one visitor's calls are charged to,
//! so that one heavy visitor of a public page (the explorer, the embed page) exhausts their
//! own quota and not the page's.
//!
//! The key is a hash of the app and the address: the limiters and Redis keep `u64` keys, and
//! every replica must derive the same key for the same visitor, so the hash is FNV-1a (64
//! bit), fixed here rather than `std`'s hasher, whose output may change between Rust
//! releases. It is not a secret and need not resist collisions made on purpose: a visitor
//! who found another address with their key would only share that address's quota. An IPv6
//! visitor is one /64 (a home or phone network gets at least that many addresses), an IPv4
//! visitor one address; an IPv4 address mapped into IPv6 counts as the IPv4 address.

use std::net::IpAddr;

/// The key the calls of `app_id` from `address` are charged to instead of `app_id`'s own.
pub fn per_address_key(app_id: u64, address: IpAddr) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(b"streetlevel per-address quota\0");
    bytes.extend_from_slice(&app_id.to_le_bytes());
    match address.to_canonical() {
        IpAddr::V4(v4) => {
            bytes.push(4);
            bytes.extend_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            bytes.push(6);
            bytes.extend_from_slice(&v6.octets()[..8]);
        }
    }
    bytes.iter().fold(OFFSET, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn one_key_per_app_and_visitor() {
        let app = 42;
        let key = per_address_key(app, ip("203.0.113.5"));
        assert_ne!(key, app);
        assert_eq!(key, per_address_key(app, ip("203.0.113.5")));
        assert_ne!(key, per_address_key(app, ip("203.0.113.6")));
        assert_ne!(key, per_address_key(app + 1, ip("203.0.113.5")));
        // The same visitor over IPv4 or IPv4-mapped IPv6.
        assert_eq!(key, per_address_key(app, ip("::ffff:203.0.113.5")));
        // One IPv6 visitor is a /64.
        assert_eq!(
            per_address_key(app, ip("2001:db8:1:2::1")),
            per_address_key(app, ip("2001:db8:1:2:ffff:eeee:dddd:cccc"))
        );
        assert_ne!(
            per_address_key(app, ip("2001:db8:1:2::1")),
            per_address_key(app, ip("2001:db8:1:3::1"))
        );
    }

    #[test]
    fn keys_do_not_change_between_builds() {
        // Replicas of different builds sharing Redis must charge a visitor to one key: a
        // change here is a change of every visitor's quota.
        assert_eq!(per_address_key(7, ip("127.0.0.1")), 0xdfa7_1b77_4535_ee3f);
    }
}
