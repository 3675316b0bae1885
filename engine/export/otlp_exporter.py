"""Where and how spans are exported: the OTLP endpoint, protocol and timeout as the
OTEL_EXPORTER_OTLP_* variables (or an explicit endpoint) say, by the OTLP exporter specification, and
the SDK's span exporter for them (`make_exporter`). The SDK is imported when an exporter is made, never
at import.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from engine.errors import ConfigError
from engine.export.optin import ENV_ENDPOINT, ENV_TRACES_ENDPOINT

ENV_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
ENV_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
ENV_TIMEOUT = "OTEL_EXPORTER_OTLP_TIMEOUT"
ENV_TRACES_TIMEOUT = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"


def traces_url(endpoint: str) -> str:
    """OTLP/HTTP: a base endpoint gets `/v1/traces` appended, as the SDK does for the base variable."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def _env(signal_name: str, base_name: str) -> tuple[str, str] | None:
    """(variable, value) of the signal-specific variable, else the base one, else None (empty = unset)."""
    for name in (signal_name, base_name):
        value = os.environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _checked_url(url: str, where: str) -> str:
    """An OTLP/HTTP URL must name its scheme: without one `requests` refuses every export (MissingSchema),
    which the SDK only logs, so every span of the session was lost behind one log line per batch."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{where} is {url!r}: an OTLP/HTTP endpoint is a URL with an http:// or https:// scheme and a "
            f"host, e.g. http://localhost:4318 (the port defaults to 80 for http and 443 for https)"
        )
    return url


def resolve_endpoint(endpoint: str | None = None) -> str:
    """The URL spans are posted to, by the OTLP exporter specification (opentelemetry-specification,
    specification/protocol/exporter.md, "Endpoint URLs for OTLP/HTTP"): a base endpoint (an argument or
    OTEL_EXPORTER_OTLP_ENDPOINT) gets `v1/traces` appended to its path; the signal-specific
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is (a collector behind a path prefix or a vendor's
    own ingest path), only an empty path becoming `/`. An explicit argument wins over both variables."""
    if endpoint:
        return traces_url(_checked_url(endpoint.strip(), "the OTLP endpoint"))
    found = _env(ENV_TRACES_ENDPOINT, ENV_ENDPOINT)
    if found is None:
        raise ConfigError(f"no OTLP endpoint: pass one, or set {ENV_ENDPOINT} (e.g. http://localhost:4318)")
    name, url = found
    _checked_url(url, name)
    if name == ENV_TRACES_ENDPOINT:
        return url if urlsplit(url).path else url + "/"
    return traces_url(url)


def resolve_protocol() -> str:
    """OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL (exporter.md, "Specify Protocol"):
    http/protobuf (the default) or grpc. http/json has no Python exporter: refused by name rather than
    sent as protobuf to a receiver that expects JSON."""
    found = _env(ENV_TRACES_PROTOCOL, ENV_PROTOCOL)
    if found is None:
        return "http/protobuf"
    name, value = found
    value = value.lower()
    if value in ("http/protobuf", "grpc"):
        return value
    if value == "http/json":
        raise ConfigError(
            f"{name}=http/json: the OpenTelemetry Python SDK has no OTLP/JSON exporter; "
            "set it to http/protobuf (collectors accept both on port 4318) or grpc"
        )
    raise ConfigError(f"{name} is {value!r}: expected http/protobuf or grpc")


def resolve_timeout_s() -> float | None:
    """OTEL_EXPORTER_OTLP_TRACES_TIMEOUT / OTEL_EXPORTER_OTLP_TIMEOUT in seconds, None when unset. The
    specification's Timeout type (configuration/common.md) is milliseconds, 0 meaning no limit (a very
    long time: 2**31-1 ms, as it suggests), and a negative or unreadable value is warned about and
    ignored. The Python exporters read the variables as seconds (opentelemetry-python #4044), so
    TIMEOUT=10000 meant a 10 000 s wait per batch: read here and passed to the exporter explicitly."""
    found = _env(ENV_TRACES_TIMEOUT, ENV_TIMEOUT)
    if found is None:
        return None
    name, value = found
    try:
        ms = float(value)
    except ValueError:
        ms = -1.0
    if ms < 0:
        import warnings

        warnings.warn(
            f"{name}={value!r} is ignored: expected a non-negative whole number of milliseconds, "
            "e.g. 10000; the exporter's default (10 s) applies",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return (ms or 2**31 - 1) / 1000.0


def _sdk() -> Any:
    try:
        from opentelemetry.sdk import trace as sdk_trace
    except ImportError as exc:
        raise ConfigError(
            "OpenTelemetry export needs the SDK: pip install 'contextpipe-inspector[otel]' "
            "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
        ) from exc
    return sdk_trace


def make_exporter(endpoint: str | None = None, timeout_s: float | None = None) -> Any:
    """The SDK's OTLP span exporter for an endpoint (or the OTEL_EXPORTER_OTLP_* variables), over the
    protocol the variables ask for; headers, compression and certificates are left to the SDK, which
    reads their variables itself."""
    _sdk()
    protocol = resolve_protocol()
    if timeout_s is None:
        timeout_s = resolve_timeout_s()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError as exc:
            raise ConfigError(
                "the OTLP protocol is grpc (OTEL_EXPORTER_OTLP_PROTOCOL), which needs "
                "pip install opentelemetry-exporter-otlp-proto-grpc; or set it to http/protobuf"
            ) from exc
        url = endpoint.strip() if endpoint else None  # gRPC has no path: the exporter reads the variables
        if url is None and _env(ENV_TRACES_ENDPOINT, ENV_ENDPOINT) is None:
            raise ConfigError(
                f"no OTLP endpoint: pass one, or set {ENV_ENDPOINT} (e.g. http://localhost:4317)"
            )
        return GrpcExporter(endpoint=url, timeout=timeout_s)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=resolve_endpoint(endpoint), timeout=timeout_s)


def exporter_url(exporter: Any) -> str:
    """Where an SDK exporter sends (for messages): its endpoint when it says, else its class name."""
    return str(getattr(exporter, "_endpoint", "") or type(exporter).__name__)
