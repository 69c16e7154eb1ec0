"""Is anything there? One short request to an OpenAI-compatible endpoint before a run pays for anything.

``unreachable(base_url)`` sends ``GET {base_url}/models`` without a key: any HTTP answer, an error status
included (401, 404), means a server listens; only a refused connection, an unknown host or a connect timeout
is a dead endpoint. It proves nothing about the model or the key (a run still finds those out on its first
call, with its retries and fallbacks); it catches the endpoint that is simply not there, which otherwise shows
only after the baseline and a round were paid for.
"""

from __future__ import annotations

import httpx

__all__ = ["context_window", "unreachable"]


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


def context_window(base_url: str, model: str, timeout: float = 3.0) -> int | None:
    """The context window the server at ``base_url`` states for ``model`` in ``GET /models``, else None.

    Read where servers say it: vLLM's ``max_model_len``, ``context_length`` (LM Studio, OpenRouter and
    others), llama.cpp's ``meta.n_ctx_train``. Servers that state none (OpenAI, llama-cpp-python) and any
    failure give None; ``context_tokens`` (or ``VERIFYLESS_CONTEXT_TOKENS``) states it by hand.
    """
    try:
        data = httpx.get(base_url.rstrip("/") + "/models", timeout=timeout).json()
    except (httpx.HTTPError, ValueError):
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("id") != model:
            continue
        meta = entry.get("meta")
        train = meta.get("n_ctx_train") if isinstance(meta, dict) else None
        for value in (entry.get("max_model_len"), entry.get("context_length"), train):
            if isinstance(value, int) and value > 0:
                return value
    return None
