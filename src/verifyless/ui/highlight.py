"""Python syntax highlighting for the dashboard, as (css class, text) spans that the templates escape.

A small regular-expression lexer (comments, strings, numbers, keywords,
built-ins, the names after ``def``/``class``, decorators); it never fails on
broken code: anything it does not recognise is plain text. Concatenating the
spans' texts gives back the source exactly. Classes: ``kw``, ``bi``, ``str``,
``com``, ``num``, ``fn``, ``dec`` and ``""`` (plain).
"""

from __future__ import annotations

import builtins
import keyword
import re

_TOKEN = re.compile(
    r"""
    (?P<com>\#[^\n]*)
  | (?P<str>[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?(?:\"\"\"|$(?![\s\S]))|'''[\s\S]*?(?:'''|$(?![\s\S]))
        |"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?))
  | (?P<dec>^[ \t]*@[\w.]+)
  | (?P<num>\b(?:0[xXoObB][\da-fA-F_]+|\d[\d_]*\.?[\d_]*(?:[eE][+-]?\d+)?j?)\b)
  | (?P<name>[A-Za-z_]\w*)
    """,
    re.VERBOSE | re.MULTILINE,
)
_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) - {"_"}
_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_"))


def python_spans(source: str) -> list[tuple[str, str]]:
    """``source`` as (class, text) spans; plain stretches between tokens keep class ``""``."""
    spans: list[tuple[str, str]] = []
    pos = 0
    after_def = False
    for m in _TOKEN.finditer(source):
        if m.start() > pos:
            spans.append(("", source[pos : m.start()]))
        kind = m.lastgroup or ""
        text = m.group()
        if kind == "name":
            kind = "fn" if after_def else "kw" if text in _KEYWORDS else "bi" if text in _BUILTINS else ""
            after_def = text in ("def", "class")
        else:
            after_def = False
        spans.append((kind, text))
        pos = m.end()
    if pos < len(source):
        spans.append(("", source[pos:]))
    return spans
