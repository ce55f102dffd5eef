"""Fetch bytes over HTTP(S) with a short timeout; callers verify before writing anything."""

from __future__ import annotations

import urllib.error
import urllib.request

DEFAULT_TIMEOUT_S = 3.0


class DownloadError(OSError):
    """A URL could not be fetched (no network, DNS failure, HTTP error, timeout)."""


def fetch_bytes(url: str, timeout: float = DEFAULT_TIMEOUT_S, max_bytes: int = 1 << 30) -> bytes:
    """The body of url, or DownloadError with a one-line reason."""
    request = urllib.request.Request(url, headers={"User-Agent": "topkscope-data-fetch"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = response.read(max_bytes + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(f"{url}: {reason}") from None
    if len(data) > max_bytes:
        raise DownloadError(f"{url}: larger than {max_bytes} bytes")
    return data
