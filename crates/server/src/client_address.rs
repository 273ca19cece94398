//! Which client a request comes from: the connection's peer, or, when that peer is a proxy
//! the configuration trusts (`trusted_proxies`), the address it says it forwarded for in
//! `X-Forwarded-For`. Sign-in and form throttling and the public app's per-visitor quotas
//! count by this address.
//!
//! `X-Forwarded-For` is read from the right: each trusted proxy appends the address it got
//! the request from, so the rightmost entry that is not a trusted proxy is the client; the
//! entries left of it are the client's own word and are never believed. From a peer that is
//! not trusted the header is ignored whole, so a client cannot choose its address.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;
use ipnet::IpNet;

/// A trusted proxy as `trusted_proxies` gives it: an address (`10.0.0.5`, `::1`) or a network
/// (`10.0.0.0/8`).
pub fn parse_trusted_proxy(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{text:?} is neither an IP address nor a network such as 10.0.0.0/8"))
}

/// Every entry of `list` as [`parse_trusted_proxy`] reads it (blank entries left out), or
/// why one cannot be read.
pub fn parse_trusted_proxies(list: &[String]) -> Result<Vec<IpNet>, String> {
    list.iter()
        .filter(|text| !text.trim().is_empty())
        .map(|text| parse_trusted_proxy(text))
        .collect()
}

/// The client of a request that arrived from `peer` with `headers`.
pub(crate) fn client_address(
    peer: SocketAddr,
    headers: &HeaderMap,
    trusted: &[IpNet],
) -> SocketAddr {
    let is_trusted = |address: IpAddr| {
        let address = address.to_canonical();
        trusted.iter().any(|network| network.contains(&address))
    };
    if trusted.is_empty() || !is_trusted(peer.ip()) {
        return peer;
    }
    // Every `X-Forwarded-For` line, in order, as one list.
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|value| value.to_str().unwrap_or("").split(','))
        .map(str::trim)
        .collect();
    let mut client = peer.ip();
    for hop in hops.iter().rev() {
        let Ok(address) = hop.parse::<IpAddr>() else {
            // What a proxy wrote cannot be garbled, so the client wrote it: the last proxy's
            // own peer is the best known.
            break;
        };
        client = address;
        if !is_trusted(address) {
            break;
        }
    }
    SocketAddr::new(client.to_canonical(), peer.port())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn peer(text: &str) -> SocketAddr {
        SocketAddr::new(text.parse().unwrap(), 40_000)
    }

    fn forwarded(lines: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append("x-forwarded-for", HeaderValue::from_str(line).unwrap());
        }
        headers
    }

    fn trusted(list: &[&str]) -> Vec<IpNet> {
        list.iter()
            .map(|text| parse_trusted_proxy(text).unwrap())
            .collect()
    }

    fn ip(address: SocketAddr) -> String {
        address.ip().to_string()
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client_whatever_it_says() {
        let headers = forwarded(&["198.51.100.7"]);
        assert_eq!(
            ip(client_address(peer("127.0.0.1"), &headers, &[])),
            "127.0.0.1"
        );
        let proxies = trusted(&["10.0.0.0/8"]);
        assert_eq!(
            ip(client_address(peer("192.0.2.1"), &headers, &proxies)),
            "192.0.2.1"
        );
    }

    #[test]
    fn a_trusted_proxy_names_the_client_and_spoofed_entries_left_of_it_are_ignored() {
        let proxies = trusted(&["127.0.0.1", "10.0.0.0/8"]);
        let one = forwarded(&["203.0.113.5"]);
        assert_eq!(
            ip(client_address(peer("127.0.0.1"), &one, &proxies)),
            "203.0.113.5"
        );
        // The client sent "1.2.3.4" itself; nginx appended its peer; a second proxy its own.
        let chain = forwarded(&["1.2.3.4, 203.0.113.5", "10.1.2.3"]);
        assert_eq!(
            ip(client_address(peer("127.0.0.1"), &chain, &proxies)),
            "203.0.113.5"
        );
        // No header: the proxy itself.
        let none = HeaderMap::new();
        assert_eq!(
            ip(client_address(peer("127.0.0.1"), &none, &proxies)),
            "127.0.0.1"
        );
        // Garbage written by the client stops the walk at the last good hop.
        let garbled = forwarded(&["203.0.113.5, not-an-address", "10.9.9.9"]);
        assert_eq!(
            ip(client_address(peer("127.0.0.1"), &garbled, &proxies)),
            "10.9.9.9"
        );
        // Every hop trusted: the leftmost.
        let inside = forwarded(&["10.0.0.7, 10.0.0.8"]);
        assert_eq!(
            ip(client_address(peer("127.0.0.1"), &inside, &proxies)),
            "10.0.0.7"
        );
        // IPv6, and an IPv4 peer written as IPv6.
        let v6 = forwarded(&["2001:db8::9"]);
        assert_eq!(
            ip(client_address(peer("::ffff:127.0.0.1"), &v6, &proxies)),
            "2001:db8::9"
        );
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks() {
        assert_eq!(
            parse_trusted_proxy(" 10.0.0.5 ").unwrap().to_string(),
            "10.0.0.5/32"
        );
        assert_eq!(parse_trusted_proxy("::1").unwrap().to_string(), "::1/128");
        assert_eq!(
            parse_trusted_proxy("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert!(parse_trusted_proxy("10.0.0.0/33").is_err());
        assert!(parse_trusted_proxy("proxy.example").is_err());
    }
}
