"""Whether an OTLP endpoint can be reached at all, asked once before `cp-inspect export` sends.

The SDK's exporters retry a refused connection with backoff (1 s, 2 s, 4 s ... within their timeout),
so `export --otlp http://localhost:4318` with no collector running took ~7-9 s to say it failed, and
the same over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc, port 4317). A refused connection or a host name
that does not resolve will not change in those seconds: one TCP connection says so at once. A
connection that times out (a firewall, a slow network) proves nothing, and neither does a check past a
proxy: those are left to the exporter's own retries.
"""

from __future__ import annotations

import socket
import urllib.request
from urllib.parse import urlsplit

# At most this long for the check itself: a refusal or a failed lookup is quick; a silent network is not
# this check's to judge.
CONNECT_S = 2.0

# gRPC's default port for a target that names none (its dns resolver's default, https).
GRPC_DEFAULT_PORT = 443


def unreachable(url: str, timeout_s: float = CONNECT_S) -> str | None:
    """What makes `url` (an http:// or https:// endpoint) unreachable right now, e.g. 'refused the
    connection', or None when a connection was made or the check cannot tell."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None  # gRPC's host:port (unreachable_grpc), or a form the exporter will judge itself
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None  # a bad port: the exporter's own error says it
    if _proxied((parts.scheme,), host):
        return None  # the connection would go to the proxy, not to this host
    return _refused(host, port, timeout_s)


def unreachable_grpc(target: str, timeout_s: float = CONNECT_S) -> str | None:
    """unreachable() for the gRPC exporter's target as it dials it (its endpoint with the scheme taken
    off: `host:port`, `[::1]:port`, or a bare host on port 443). Other target forms (dns:///..., unix:...,
    ipv4:...) are gRPC's own resolvers': None, the exporter judges them."""
    if "/" in target or target.startswith(("unix:", "ipv4:", "ipv6:", "vsock:")):
        return None
    host, sep, port_text = target.rpartition(":")
    if not sep or host.endswith(":") or (host.startswith("[") != host.endswith("]")):
        host, port_text = target, ""  # no port, or a bare IPv6 address: gRPC's default port
    host = host.strip("[]")
    if not host:
        return None
    if port_text and not port_text.isdigit():
        return None  # a bad port: the exporter's own error says it
    port = int(port_text) if port_text else GRPC_DEFAULT_PORT
    if not 0 < port < 65536:
        return None
    # gRPC goes through $grpc_proxy, else $https_proxy, else $http_proxy (and honours $no_proxy).
    if _proxied(("grpc", "https", "http"), host):
        return None
    return _refused(host, port, timeout_s)


def _refused(host: str, port: int, timeout_s: float) -> str | None:
    """One TCP connection to host:port: what it says when it is refused or the host does not resolve."""
    try:
        with socket.create_connection((host, port), timeout=min(timeout_s, CONNECT_S)):
            return None
    except ConnectionRefusedError:
        return f"refused the connection (nothing listens on {host} port {port})"
    except socket.gaierror:
        return f"names a host that does not resolve ({host!r})"
    except OSError:
        return None  # a timeout or an unreachable network: worth the exporter's retries


def _proxied(schemes: tuple[str, ...], host: str) -> bool:
    """Whether the client would go through a proxy (one of `schemes`' $NAME_proxy, or $all_proxy, and
    not $no_proxy) for host."""
    proxies = urllib.request.getproxies()
    if not any(s in proxies for s in (*schemes, "all")):
        return False
    return not urllib.request.proxy_bypass(host)
