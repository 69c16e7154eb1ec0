"""Stored values as safe display text: redaction, numbers, times, durations, short texts and diffs.

The one home of the formatters that the report, the dashboard and the CLI share (one per kind):

* ``number(value, digits=5)``: a score or any other table number; ``-`` for None, NaN and infinities,
  ints and bools as they are, floats with ``digits`` significant digits;
* ``percent(value)``: a fraction in 0..1 as a percentage with one decimal, ``-`` for None;
* ``duration(seconds)``: ``1 min 35 s`` (the dashboard's ETA; ``ui.js`` draws the same words);
* ``iso(ts)``: a Unix time as local ``YYYY-MM-DD HH:MM:SS``;
* ``visible(text)``: control characters (but newline and tab) as visible escapes, for anything bound for a
  terminal; ``one_line(text, n)``: untrusted text (a failed node's reason, which quotes its program's stderr) as one short
  line a terminal shows as it is: control characters written as visible escapes, cut to ``n`` characters.

``num`` reads a stored value as a finite float (or None); ``redact`` masks secret-looking keys and
API-key-looking strings, and ``dump`` is redacted, bounded JSON text. Pure functions, no store access.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CONTROL",
    "REDACTED",
    "diff_lines",
    "dump",
    "duration",
    "iso",
    "num",
    "number",
    "one_line",
    "percent",
    "redact",
    "short",
    "visible",
]

REDACTED = "[redacted]"
_SECRET_KEY = re.compile(
    r"(api[_-]?key|secret|password|passwd|authorization|bearer|credential|access[_-]?token)", re.IGNORECASE
)
_SECRET_VALUE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{12,}|Bearer\s+[A-Za-z0-9._\-]{12,})")


def redact(value: Any) -> Any:
    """A copy of ``value`` with secret-looking keys' values and API-key-looking strings replaced by REDACTED."""
    if isinstance(value, Mapping):
        return {
            str(k): (REDACTED if _SECRET_KEY.search(str(k)) and v not in (None, "") else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _SECRET_VALUE.sub(REDACTED, value)
    return value


def num(value: Any) -> float | None:
    """``value`` as a finite float; None when it is missing, not a number, NaN or infinite."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def iso(ts: float | None) -> str:
    """A Unix time as local ``YYYY-MM-DD HH:MM:SS``; '' for None."""
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(ts)))


def dump(value: Any, limit: int = 4000) -> str:
    """Redacted, indented JSON of ``value``, cut after ``limit`` characters (the cut says how much is left)."""
    text = json.dumps(redact(value), indent=1, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters)"


def number(value: Any, digits: int = 5) -> str:
    """A table number: '-' for None/NaN/inf, ints and bools as they are, floats with ``digits`` significant digits."""
    if value is None:
        return "-"
    if isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        return "-" if not math.isfinite(value) else f"{value:.{digits}g}"
    return str(value)


def percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal (``0.123`` -> ``12.3``); '-' for None."""
    return "-" if value is None else f"{100 * value:.1f}"


def duration(seconds: float | None) -> str:
    """``95`` -> ``1 min 35 s``; ``None`` -> ``-`` (the dashboard's ETA, also drawn by ui.js)."""
    if seconds is None:
        return "-"
    s = int(seconds + 0.5)
    h, m = divmod(s // 60, 60)
    return f"{h} h {m} min" if h else (f"{m} min {s % 60} s" if m else f"{s} s")


def short(text: str, n: int = 140) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


# C0 but tab and newline, DEL, C1, and the invisible marks and overrides that reorder text (Trojan Source)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab written as a visible escape (``\\x1b``,
    ``\\u202e``); ``\\r\\n`` is a newline. The command line's consoles apply it to all they print
    (``_cli/terminal.py``)."""
    return CONTROL.sub(_escape, text.replace("\r\n", "\n"))


def one_line(text: str, n: int = 120) -> str:
    """``text`` on one line for a terminal: whitespace runs (newlines included) one space, every other control
    character a visible escape (``visible``), cut to ``n`` characters with an ellipsis."""
    return short(visible(" ".join(str(text or "").split())), n)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def diff_lines(old: str, new: str, old_name: str = "parent", new_name: str = "node") -> list[tuple[str, str]]:
    """A unified diff as (css class, line) pairs: ``add``, ``del``, ``hunk``, ``file`` or ``ctx``."""
    out = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm="", n=3):
        if line.startswith(("+++", "---")):
            cls = "file"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        else:
            cls = "ctx"
        out.append((cls, line))
    return out
