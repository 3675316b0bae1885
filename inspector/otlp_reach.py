"""Whether an OTLP/HTTP endpoint can be reached at all, asked once before `cp-inspect export` sends.

The SDK's exporter retries a refused connection with backoff (1 s, 2 s, 4 s ... within its timeout),
so `export --otlp http://localhost:4318` with no collector running took ~7-9 s to say it failed. A
refused connection or a host name that does not resolve will not change in those seconds: one TCP
connection says so at once. A connection that times out (a firewall, a slow network) proves nothing,
and neither does a check past an HTTP proxy: those are left to the exporter's own retries.
"""

from __future__ import annotations

import socket
import urllib.request
from urllib.parse import urlsplit

# At most this long for the check itself: a refusal or a failed lookup is quick; a silent network is not
# this check's to judge.
CONNECT_S = 2.0


def unreachable(url: str, timeout_s: float = CONNECT_S) -> str | None:
    """What makes `url` (an http:// or https:// endpoint) unreachable right now, e.g. 'refused the
    connection', or None when a connection was made or the check cannot tell."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None  # gRPC's host:port, or a form the exporter will judge itself
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None  # a bad port: the exporter's own error says it
    if _proxied(parts.scheme, host):
        return None  # the connection would go to the proxy, not to this host
    try:
        with socket.create_connection((host, port), timeout=min(timeout_s, CONNECT_S)):
            return None
    except ConnectionRefusedError:
        return f"refused the connection (nothing listens on {host} port {port})"
    except socket.gaierror:
        return f"names a host that does not resolve ({host!r})"
    except OSError:
        return None  # a timeout or an unreachable network: worth the exporter's retries


def _proxied(scheme: str, host: str) -> bool:
    """Whether the HTTP client would go through a proxy ($HTTP_PROXY, $HTTPS_PROXY, not $NO_PROXY) for host."""
    proxies = urllib.request.getproxies()
    if scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass(host)
