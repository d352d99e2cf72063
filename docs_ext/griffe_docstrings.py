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

- A convention parameter (``gain``, ``ties``, ``empty_target_action``, ...) whose signature default
  is ``None`` ("the convention's") shows its effective default in the Default column,
  ``None → "exp2"``: the value of :data:`torch_rankeval.conventions.DEFAULT` that ``None`` stands
  for when no ``convention=`` preset is given (a preset's own value wins, as the docstrings say).

Only the rendered reference changes; the docstrings (and ``help()``) stay as written.
"""

from __future__ import annotations

import re
from dataclasses import fields
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


_NOT_RENDERED = ("torch_rankeval.kernels", "torch_rankeval.ranking")  # internal layers, not in the reference


def effective_defaults() -> dict[str, str]:
    """``{parameter: 'None → <DEFAULT value>'}`` for the convention fields that have a default other than None.

    Example:
        >>> effective_defaults()["gain"], effective_defaults()["ties"]
        ("None → 'exp2'", "None → 'average'")
    """
    from torch_rankeval.conventions import DEFAULT

    values = {f.name: getattr(DEFAULT, f.name) for f in fields(DEFAULT)}
    return {name: f"None → {value!r}" for name, value in values.items() if value is not None and value != ()}


def _takes_a_convention(obj: griffe.Object, defaults: dict[str, str]) -> bool:
    """Whether ``obj``'s signature has a convention parameter defaulting to None (only those docstrings are parsed here)."""
    try:
        parameters = obj.parameters  # a class: its __init__'s
    except Exception:  # noqa: BLE001 -- a class whose __init__ griffe cannot resolve: nothing to show
        return False
    return any(p.name in defaults and str(p.default) == "None" for p in parameters)


def _show_effective_defaults(obj: griffe.Object, defaults: dict[str, str]) -> None:
    """Set the Default column of ``obj``'s documented convention parameters (and its members')."""
    if obj.is_alias or obj.name.startswith("_") or obj.path.startswith(_NOT_RENDERED):
        return  # what the API reference does not render is not parsed here either
    if obj.docstring is not None and (obj.is_function or obj.is_class) and _takes_a_convention(obj, defaults):
        for section in obj.docstring.parsed:
            if section.kind is griffe.DocstringSectionKind.parameters:
                for parameter in section.value:
                    if parameter.name in defaults and str(parameter.value) == "None":
                        parameter.value = defaults[parameter.name]
    for member in obj.members.values():
        _show_effective_defaults(member, defaults)


class ProjectDocstrings(griffe.Extension):
    """Rewrites each docstring (:func:`rewrite`) before griffe parses it; once the package is loaded,
    shows the convention parameters' effective defaults."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name == "torch_rankeval":
            _show_effective_defaults(pkg, effective_defaults())
