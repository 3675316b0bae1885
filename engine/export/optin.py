"""Whether an agent exports OpenTelemetry: read at every Pipeline construction, so it imports nothing."""

from __future__ import annotations

import os

ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"


def otel_requested(flag: bool | None) -> bool:
    """An explicit argument wins; otherwise the standard variables opt in (and OTEL_SDK_DISABLED out)."""
    if flag is not None:
        return flag
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(os.environ.get(ENV_TRACES_ENDPOINT) or os.environ.get(ENV_ENDPOINT))
