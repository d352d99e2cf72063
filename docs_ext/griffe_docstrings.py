"""A griffe extension for the API reference (mkdocs.yml): reads this project's docstring habits.

- ``Example:`` (singular, as every docstring here writes it) is read as Google's ``Examples:``
  section, so the doctest lines render as code blocks instead of Markdown quotes.
- A parameter group whose names wrap onto a second line (``gain, log_base, ..., graded,`` then
  ``adaptive_k, convention: ...``) is joined into one line, so the names and the description
  pair up.

Only the rendered reference changes; the docstrings (and ``help()``) stay as written.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)
# a line of comma-separated names ending in a comma, followed by a more deeply indented line
_WRAPPED_NAMES = re.compile(r"^([ \t]*)(\w+(?:, \w+)*,)[ \t]*\n[ \t]+(?=[\w, ]+:)", re.MULTILINE)


def rewrite(text: str) -> str:
    """The docstring as the Google parser expects it.

    Example:
        >>> rewrite("Args:\\n    a, b,\\n        c: the three.\\n\\nExample:\\n    >>> 1\\n    1")
        'Args:\\n    a, b, c: the three.\\n\\nExamples:\\n    >>> 1\\n    1'
    """
    text = _EXAMPLE.sub(r"\1Examples:", text)
    return _WRAPPED_NAMES.sub(r"\1\2 ", text)


class ProjectDocstrings(griffe.Extension):
    """Rewrites each docstring (:func:`rewrite`) before griffe parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
