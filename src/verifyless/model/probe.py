"""Is anything there? One short request to an OpenAI-compatible endpoint before a run pays for anything.

``unreachable(base_url)`` sends ``GET {base_url}/models`` without a key: any HTTP answer, an error status
included (401, 404), means a server listens; only a refused connection, an unknown host or a connect timeout
is a dead endpoint. It proves nothing about the model or the key (a run still finds those out on its first
call, with its retries and fallbacks); it catches the endpoint that is simply not there, which otherwise shows
only after the baseline and a round were paid for.
"""

from __future__ import annotations

import httpx

__all__ = ["unreachable"]


def unreachable(base_url: str, timeout: float = 10.0) -> str | None:
    """Why nothing answers at ``base_url`` (module docstring); None when a server answered."""
    try:
        httpx.get(base_url.rstrip("/") + "/models", timeout=timeout)
    except httpx.ConnectTimeout:
        return f"no connection within {timeout:g} s"
    except (httpx.ConnectError, httpx.UnsupportedProtocol) as exc:
        return f"cannot connect: {exc}"
    except httpx.HTTPError:
        return None  # something answered, if oddly: the run's own calls will say more
    return None
