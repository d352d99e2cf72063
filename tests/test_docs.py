"""The documentation site (mkdocs.yml, docs/) and the README: every Python example is a doctest the
suite runs, every page is in the navigation, and the README stays a short front page.

The pages' doctests themselves run through pytest's ``--doctest-glob`` (pyproject.toml); this file
checks that nothing escapes them. ``.ci/run`` builds the site with ``mkdocs build --strict``.
"""

from __future__ import annotations

import re

import pytest
from _pytest.pathlib import fnmatch_ex

from tests.conftest import REPO

DOCS = REPO / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
MARKDOWN = [REPO / "README.md", *PAGES]
# an opening or closing fence, possibly indented (inside a content tab); group 2: the info string
FENCE = re.compile(r"^([ \t]*)```+[ \t]*(\S*)[^\n]*$", re.MULTILINE)
PYTHON = {"python", "py", "pycon"}
# the modules the API reference documents, one page each
REFERENCE = {
    "functional": "torch_rankeval.functional",
    "metrics": "torch_rankeval.metrics",
    "conventions": "torch_rankeval.conventions",
    "measures": "torch_rankeval.measures",
    "trec": "torch_rankeval.trec",
    "stats": "torch_rankeval.stats",
    "lightning": "torch_rankeval.lightning",
    "diagnostics": "torch_rankeval.diagnostics",
    "plotting": "torch_rankeval.plotting",
    "data": "torch_rankeval.data",
    "sampler": "torch_rankeval.sampler",
    "propensity": "torch_rankeval.propensity",
    "losses": "torch_rankeval.losses",
}


def _blocks(text: str) -> list[tuple[str, str, int]]:
    """(language, body, line) of every fenced block; an unclosed fence is an error."""
    fences = list(FENCE.finditer(text))
    assert len(fences) % 2 == 0, "an unclosed ``` fence"
    out = []
    for opening, closing in zip(fences[::2], fences[1::2]):
        assert closing.group(2) == "", (
            f"line {text.count(chr(10), 0, closing.start()) + 1}: a fence opens inside a block"
        )
        body = text[opening.end() : closing.start()]
        out.append((opening.group(2), body, text.count("\n", 0, opening.start()) + 1))
    return out


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(REPO)))
def test_every_python_block_is_a_doctest_and_no_other_block_runs(path):
    text = path.read_text()
    blocks = _blocks(text)
    for language, body, line in blocks:
        where = f"{path.relative_to(REPO)}:{line}"
        assert language, f"{where}: a fence without a language (python for a doctest, text or bash for the rest)"
        lines = [s.strip() for s in body.splitlines() if s.strip()]
        prompts = [s for s in lines if s.startswith(">>>")]
        if language in PYTHON:
            assert lines and lines[0].startswith(">>>"), f"{where}: a python block that is not a doctest"
        else:
            assert not prompts, f"{where}: a {language} block with >>> lines would run as a doctest"
    # a line starting with >>> outside any fence would run without being shown as code
    outside = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.DOTALL | re.MULTILINE)
    assert not re.search(r"^[ \t]*>>>", outside, flags=re.MULTILINE), path


def test_the_suite_collects_every_page_as_a_doctest():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    globs = re.findall(r"--doctest-glob=(\S+)", config["addopts"])
    assert "docs" in config["testpaths"] and "README.md" in config["testpaths"]
    for path in MARKDOWN:
        assert any(fnmatch_ex(glob, path) for glob in globs), path
    assert sum(">>>" in p.read_text() for p in PAGES) >= 20  # the guide, the migration guides, ...


def test_every_page_is_in_the_navigation_and_the_reference_covers_the_modules():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert config["strict"] is True

    def leaves(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from leaves(item)
        elif isinstance(node, dict):
            for item in node.values():
                yield from leaves(item)

    nav = sorted(leaves(config["nav"]))
    assert nav == sorted(str(p.relative_to(DOCS)) for p in PAGES)
    for page, module in REFERENCE.items():
        assert f"::: {module}" in (DOCS / "reference" / f"{page}.md").read_text(), page
    for name in ("torchmetrics", "ranx", "ir-measures", "trec-eval", "recbole"):
        assert (DOCS / "migration" / f"{name}.md").is_file(), name


def test_readme_is_a_front_page_with_the_quick_start_commands():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert 'python -m pip install -e ".[all]" && python -m pytest -n 2' in readme  # CI runs this command
    assert "python examples/train_ltr.py fit --config configs/train_ltr.yaml" in readme


def test_ci_runs_the_readme_test_command_and_builds_the_site_strict():
    ci = REPO / ".ci" / "run"
    if not ci.is_file():
        pytest.skip(".ci/run is not in the sdist")
    assert "python -m pytest -n 2" in ci.read_text()
    assert "mkdocs build --strict" in ci.read_text()


def test_readme_links_point_at_files_of_the_repository():
    """mkdocs checks the pages' links; README.md is outside the site, so its relative links are checked here."""
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 20
    for link in local:
        assert (REPO / link).exists(), link


def _docstring_extension():
    import importlib.util

    spec = importlib.util.spec_from_file_location("griffe_docstrings", REPO / "docs_ext" / "griffe_docstrings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_reads_example_sections_and_wrapped_parameter_groups():
    """docs_ext/griffe_docstrings.py: what mkdocs.yml's API reference does to this project's docstrings."""
    pytest.importorskip("griffe")
    module = _docstring_extension()
    text = "Args:\n    gain, ties,\n        k: conventions\n            of the library.\n    x: one.\n\nExample:\n    >>> 1\n    1\n"
    assert module.rewrite(text) == (
        "Args:\n    gain: conventions\n            of the library.\n    ties: As ``gain``.\n    k: As ``gain``.\n"
        "    x: one.\n\nExamples:\n    >>> 1\n    1\n"
    )
    assert module.rewrite("An Example: not a section.") == "An Example: not a section."
    assert module.rewrite("Uses :class:`~a.b.NDCG`, :func:`f` and :mod:`a.b`.") == "Uses ``NDCG``, ``f`` and ``a.b``."


def test_every_documented_parameter_of_a_metric_class_finds_its_signature_row():
    """The rendered Args table pairs each name with the signature's default: a group such as
    ``log_base, discount:`` read as one name showed "required" in the Default column."""
    griffe = pytest.importorskip("griffe")
    from griffe import DocstringSectionKind

    module = _docstring_extension()
    package = griffe.load(
        "torch_rankeval", search_paths=[str(REPO)], extensions=griffe.load_extensions(module.ProjectDocstrings)
    )
    checked = 0
    for name in ("NDCG", "DCG", "MAP", "RankingMetrics", "PositionProfile"):
        cls = package["metrics"][name]
        cls = cls.final_target if cls.is_alias else cls
        signature = {p.name: p for p in cls.parameters}
        for section in cls.docstring.parse("google"):
            if section.kind is not DocstringSectionKind.parameters:
                continue
            for entry in section.value:
                assert entry.name in signature, (name, entry.name)
                if signature[entry.name].default is not None:
                    assert str(entry.default) == str(signature[entry.name].default), (name, entry.name)
                    checked += 1
    assert checked >= 40
