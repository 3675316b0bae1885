"""Whether an agent exports OpenTelemetry: read at every Pipeline construction, so it imports nothing."""

from __future__ import annotations

import os

ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"


def otel_requested(flag: bool | None) -> bool:
    """An explicit argument wins; otherwise the standard variables opt in, and OTEL_SDK_DISABLED=true or
    an OTEL_TRACES_EXPORTER without otlp (`none`, as the SDK environment variables define it) opt out:
    an endpoint set for a process's metrics or logs with traces switched off exported traces anyway."""
    if flag is not None:
        return flag
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters and "otlp" not in {e.strip() for e in exporters.split(",")}:
        return False
    return bool(os.environ.get(ENV_TRACES_ENDPOINT) or os.environ.get(ENV_ENDPOINT))
