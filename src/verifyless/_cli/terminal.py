"""The one boundary where text reaches the user's terminal: control characters made visible, markup kept literal.

Text a candidate wrote (its stderr, a failure reason quoting it, an LLM's idea or summary, an error message that
quotes any of them) is untrusted: a program that writes ``\\x1b[2J\\x1b]0;pwned\\x07`` would clear the screen
and set the window title if it reached a terminal raw, and ``[bold]`` or ``[/]`` in it would be read as rich
markup (a stray closing tag even raises). Two defences, one helper each:

* ``visible(text)`` (``report.text.visible``, which ``report.text.one_line`` shares): every control character but newline and tab (C0, DEL, C1, and the bidirectional overrides
  that reorder what a reader sees) written as a visible escape (``\\x1b``, ``\\u202e``); ``\\r\\n`` is a newline.
  ``TerminalConsole`` applies it to every string it renders and to every segment it writes that is not rich's own
  cursor control, so no control character reaches the terminal through the command line's consoles, wherever the
  text came from.
* ``shown(text)``: ``visible`` plus rich's markup escape, for untrusted text put inside a markup string
  (``f"[red]{shown(reason)}[/]"``); printing a whole untrusted line with ``markup=False`` does the same.

The HTML report and the dashboard escape on their own (Jinja autoescape: docs/design/report-and-ui.md).

A reader that goes away (``verifyless run ... | head``) is the third thing a terminal can do to a command:
``TerminalConsole`` then goes on without output (``on_broken_pipe``) instead of rich's ``SystemExit(1)`` from inside
whatever printed, which stopped a run mid-way or after it finished, before its status was written, and left it
marked interrupted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from verifyless.report.text import CONTROL, visible

__all__ = ["TerminalConsole", "shown", "visible"]


def _reader_gone(stream: Any) -> None:
    """Point ``stream``'s file descriptor at ``/dev/null``: its reader went away, so what is still written, and what
    Python flushes at exit, goes nowhere instead of raising ``BrokenPipeError`` again."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO): nothing to redirect
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def shown(text: object) -> str:
    """``str(text)`` safe inside a rich markup string: control characters visible, markup shown literally."""
    return escape(visible(str(text)))


class TerminalConsole(Console):
    """A rich ``Console`` that writes no control character it did not make itself (module docstring).

    Strings are made ``visible`` before rich reads their markup and measures them (so tables stay aligned); the
    segments of anything else (a ``Text`` built elsewhere, a log record) are checked as they are written. rich's
    own cursor moves (control segments: the live progress display) pass unchanged.
    """

    def on_broken_pipe(self) -> None:
        """The reader went away: print nothing more and let the command finish its work (module docstring)."""
        self.quiet = True
        _reader_gone(self.file)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text), **kwargs)

    def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not CONTROL.search(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style)
