"""Markdown that text from elsewhere cannot break out of (a pull-request comment is read by
people who trust it, and the text comes from manifests, a snapshot a pull request may change,
and the live systems).

- :func:`fence`: a fenced block whose fence is longer than any run of backticks in the text
  (CommonMark closes a block only with a fence at least as long as the opening one), so a
  line of backticks inside cannot end it;
- :func:`code`: an inline code span, delimited the same way, on one line, with ``|`` escaped
  (GitHub splits table cells on it even inside code);
- :func:`text`: plain text with every character that Markdown or HTML would interpret
  backslash-escaped or written as an entity, on one line.

Every string a renderer takes from data goes through one of them; the renderers' own words and
validated names (DNS labels, label terms) may be written as they are.
"""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")
_SPECIAL = re.compile(r"([\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
"""What starts markup in the middle of a line (a line break is never kept, so what only acts
at a line's start, ``#``, ``-``, ``>``, ``1.``, cannot start a line). ``_`` inside a word never
emphasises (``Port_Group`` stays as it is)."""
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def fence(body: str, info: str = "") -> list[str]:
    """The lines of a fenced code block holding ``body`` (``info``: its language)."""
    ticks = "`" * max(3, _longest_backticks(body) + 1)
    return [f"{ticks}{info}", *body.rstrip("\n").split("\n"), ticks]


def code(value: object) -> str:
    """``value`` as an inline code span on one line, safe in a table cell."""
    body = _LINE_BREAKS.sub(" ", str(value)).replace("|", "\\|")
    ticks = "`" * (_longest_backticks(body) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def text(value: object) -> str:
    """``value`` as plain Markdown text on one line: nothing in it is markup, HTML, a link, a
    heading or a list (``@`` is followed by a word joiner, so no one is mentioned; so are
    ``://`` and ``www.``, so nothing becomes a link)."""
    one_line = _LINE_BREAKS.sub(" ", str(value))
    escaped = one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    escaped = _SPECIAL.sub(r"\\\1", escaped)
    for mark, joined in _JOINED:
        escaped = escaped.replace(mark, joined)
    return escaped


_JOINED = (("@", "@\u2060"), ("://", ":\u2060//"), ("www.", "www\u2060."))
