"""The SSRF guard: a webhook target must resolve to public addresses only.

Refused unless a setting allows their network (`TRACKER_WEBHOOK_ALLOW_NETWORKS`, CIDRs): loopback,
private (RFC 1918, unique-local), link-local (cloud metadata at 169.254.169.254 included),
carrier-grade NAT, unspecified, multicast and reserved addresses, cloud platform addresses that are
public yet reach the host's provider (Azure's 168.63.129.16), and IPv4-mapped forms of them.
Every resolved address is checked (a name with one private address is refused), at subscription
time and again before each attempt; the attempt then connects to the address that was checked,
so a name that re-resolves elsewhere in between (DNS rebinding) cannot move it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_PLATFORM = (
    # Azure's platform address (the WireServer and its metadata, DHCP and DNS) is a public
    # address every Azure VM reaches: https://learn.microsoft.com/azure/virtual-network/what-is-ip-address-168-63-129-16
    ipaddress.ip_network("168.63.129.16/32"),
)


class TargetRefused(ValueError):
    """A webhook URL the guard refuses (the message says why, in one line)."""


@dataclass(frozen=True)
class Target:
    """A checked webhook URL: its scheme, host, port and the address to connect to."""

    url: str
    scheme: str
    host: str
    port: int
    address: Address


def parse_networks(text: str) -> tuple[Network, ...]:
    """`10.0.0.0/8, ::1/128` → networks; ValueError naming the bad item."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if item:
            try:
                out.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"{item!r} is not an IP network (CIDR)") from None
    return tuple(out)


def _why_not_public(addr: Address) -> str | None:
    if isinstance(addr, ipaddress.IPv6Address):
        # IPv6 forms that carry an IPv4 address a host may route to: IPv4-mapped, 6to4
        # (2002::/16) and Teredo (its client address): judged by the address they wrap.
        for inner in (addr.ipv4_mapped, addr.sixtofour, addr.teredo[1] if addr.teredo else None):
            if inner is not None:
                why = _why_not_public(inner)
                if why is not None:
                    return f"{why} (wrapped in {addr})"
    checks = (
        (addr.is_loopback, "loopback"),
        (addr.is_link_local, "link-local"),
        (addr.is_unspecified, "unspecified"),
        (addr.is_multicast, "multicast"),
        (isinstance(addr, ipaddress.IPv4Address) and addr in _CGNAT, "shared (carrier-grade NAT)"),
        (any(addr in net for net in _PLATFORM), "cloud platform (Azure WireServer)"),
        (addr.is_private, "private"),
        (addr.is_reserved, "reserved"),
        (not addr.is_global, "not globally routable"),
    )
    return next((why for bad, why in checks if bad), None)


def check_address(addr: Address, allow: Sequence[Network]) -> None:
    """TargetRefused unless `addr` is public or in an allowed network."""
    why = _why_not_public(addr)
    if why is not None and not any(addr in net for net in allow):
        raise TargetRefused(
            f"{addr} is a {why} address; allow its network in TRACKER_WEBHOOK_ALLOW_NETWORKS "
            "to deliver there"
        )


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL without credentials; TargetRefused otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"{url!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetRefused(f"{url!r} is not an http(s) URL")
    if parts.username or parts.password:
        raise TargetRefused("a webhook URL carries no credentials (the signature authenticates)")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def resolve(url: str, allow: Sequence[Network]) -> Target:
    """Check `url` and every address its host resolves to; the Target connects to the first."""
    scheme, host, port = check_url(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise TargetRefused(f"cannot resolve {host!r}: {exc}") from None
    addresses: list[Address] = []
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).partition("%")[0])
        if addr not in addresses:
            addresses.append(addr)
    if not addresses:
        raise TargetRefused(f"{host!r} resolves to no address")
    for addr in addresses:
        check_address(addr, allow)
    return Target(url, scheme, host, port, addresses[0])
