"""The installed verifyless version, for reports and run cards."""

from __future__ import annotations

__all__ = ["release"]


def release() -> str:
    """The installed distribution's version; ``dev`` when running from a source tree without one."""
    try:
        from importlib.metadata import version

        return version("verifyless")
    except Exception:  # noqa: BLE001 - not installed (running from a source tree)
        return "dev"
