"""Which connections count as one client for the per-address caps (`--max-client-connections`), over
HTTP and gRPC alike.

An IPv4 client is its address. An IPv6 client is its /64: one host or one subscriber is given a whole
/64 (a LAN's prefix, SLAAC and privacy addresses pick any interface identifier in it), so counting each
/128 on its own let a single machine open the cap's worth of connections from every one of its 2^64
addresses. An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, a dual-stack listener's IPv4 client) is
the IPv4 address it maps. Anything that is not an IP address (a unix socket's name) is itself.
"""

from __future__ import annotations

import functools
import ipaddress

IPV6_PREFIX = 64  # bits of an IPv6 address that name one client


@functools.lru_cache(maxsize=4096)
def client_group(host: str) -> str:
    """The client `host` counts as: the IPv4 address, or the IPv6 /64 (`2001:db8:1:2::/64`)."""
    try:
        ip = ipaddress.ip_address(host.split("%")[0])  # a zone (`fe80::1%eth0`) is the same host
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_PREFIX), strict=False))
    return str(ip)
