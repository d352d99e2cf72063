"""A griffe extension for the API reference (mkdocs.yml): reads this project's docstring habits.

- ``Example:`` (singular, as every docstring here writes it) is read as Google's ``Examples:``
  section, so the doctest lines render as code blocks instead of Markdown quotes.
- A parameter group whose names wrap onto a second line (``gain, log_base, ..., graded,`` then
  ``adaptive_k, convention: ...``) is joined into one line, so the names and the description
  pair up.
- Sphinx roles (``:class:`~a.b.C```, ``:mod:`a.b```), which Markdown would print as written,
  become inline code (```C```, ```a.b```; a leading ``~`` keeps the last name only, as in Sphinx).
- A parameter group (``log_base, discount: ...``) becomes one entry per name: the first carries the
  description, each other one reads "As ``first``." So every parameter finds its row, type and
  default in the rendered table (a group read as one name showed "required" in the Default column).

Only the rendered reference changes; the docstrings (and ``help()``) stay as written.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)
# a line of comma-separated names ending in a comma, followed by a more deeply indented line
_WRAPPED_NAMES = re.compile(r"^([ \t]*)(\w+(?:, \w+)*,)[ \t]*\n[ \t]+(?=[\w, ]+:)", re.MULTILINE)
_GROUP = re.compile(r"^([ \t]*)(\w+(?:, \w+)+):(.*)$")
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|obj|exc|const):`(~?)([^`]+)`")
_SECTION = re.compile(r"^([ \t]*)(Args|Arguments|Parameters):[ \t]*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _split_groups(text: str) -> str:
    """One ``Args:`` entry per name: ``a, b: text`` -> ``a: text`` then ``b: As ``a``.``."""
    lines, out, section = text.split("\n"), [], None
    i = 0
    while i < len(lines):
        line = lines[i]
        if _SECTION.match(line) is not None:
            section = _indent(line)
        elif section is not None and line.strip() and _indent(line) <= section:
            section = None
        group = _GROUP.match(line) if section is not None else None
        if group is None or _indent(line) <= section:
            out.append(line)
            i += 1
            continue
        pad, names, rest = group.group(1), group.group(2).split(", "), group.group(3)
        out.append(f"{pad}{names[0]}:{rest}")
        i += 1
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > len(pad)):
            if not lines[i].strip() and (i + 1 == len(lines) or _indent(lines[i + 1]) <= len(pad)):
                break
            out.append(lines[i])
            i += 1
        out.extend(f"{pad}{name}: As ``{names[0]}``." for name in names[1:])
    return "\n".join(out)


def rewrite(text: str) -> str:
    """The docstring as the Google parser expects it.

    Example:
        >>> rewrite("Args:\\n    a, b,\\n        c: the three.\\n\\nExample:\\n    >>> 1\\n    1")
        'Args:\\n    a: the three.\\n    b: As ``a``.\\n    c: As ``a``.\\n\\nExamples:\\n    >>> 1\\n    1'
        >>> rewrite("See :class:`~torch_rankeval.NDCG` and :mod:`torch_rankeval.conventions`.")
        'See ``NDCG`` and ``torch_rankeval.conventions``.'
    """
    text = _EXAMPLE.sub(r"\1Examples:", text)
    text = _ROLE.sub(lambda m: f"``{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}``", text)
    return _split_groups(_WRAPPED_NAMES.sub(r"\1\2 ", text))


class ProjectDocstrings(griffe.Extension):
    """Rewrites each docstring (:func:`rewrite`) before griffe parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
