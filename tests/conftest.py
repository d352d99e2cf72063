"""Shared test fixtures: the trec_eval conformance collection and small generators."""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TORCH_RANKEVAL_SHARED", REPO.parent / "shared"))
TREC_EVAL_TEST = SHARED / "trec_eval_test"


@pytest.fixture(scope="session")
def trec_eval_test_dir() -> Path:
    """trec_eval's own test collection (qrels, runs, expected outputs), read from ../shared."""
    if not (TREC_EVAL_TEST / "qrels.test").exists():
        pytest.skip(f"trec_eval's test collection is not at {TREC_EVAL_TEST} (set TORCH_RANKEVAL_SHARED)")
    return TREC_EVAL_TEST


def run_example(name: str, *argv: str) -> str:
    """Run ``examples/<name>`` as ``python examples/<name> ARGV...`` runs it (its ``__main__`` block,
    ``sys.argv`` set), in this process (without the interpreter's 5-10 s of imports a subprocess pays
    on two cores), and return what it printed. The global random state is restored afterwards."""
    path = REPO / "examples" / name
    out = io.StringIO()
    saved = sys.argv
    sys.argv = [str(path), *argv]
    import torch

    try:
        with torch.random.fork_rng(), contextlib.redirect_stdout(out):
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = saved
    return out.getvalue()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where this run (after ``-m`` / ``-k``) holds a test of Lightning's DDP (the ``lightning_ddp``
    fixture), the fork server of the multi-process tests imports Lightning once (5-7 s on two cores)
    instead of each of those tests' processes; a run without one (the oldest-torchmetrics subset) does
    not pay for it."""
    if any("lightning_ddp" in getattr(item, "fixturenames", ()) for item in session.items):
        from tests import distributed_helpers

        distributed_helpers.PRELOAD[:] = [*dict.fromkeys(distributed_helpers.PRELOAD + distributed_helpers.LIGHTNING)]


@pytest.fixture
def lightning_ddp() -> object:
    """Lightning's ``strategy="ddp_spawn"`` (the module, its metrics and the callbacks pickled into each
    process, results sent back the same way) with the processes forked by the gloo tests' fork server
    (``tests/distributed_helpers.py``): a fresh interpreter each, as with ``spawn``, without its 10-15 s
    of imports on two cores. A run that holds a test using this fixture has the server import Lightning
    too (:func:`pytest_collection_finish`)."""
    strategies = pytest.importorskip("lightning.pytorch.strategies")
    from tests.distributed_helpers import preload_fork_server

    preload_fork_server()  # where this test is the first to start the server
    return strategies.DDPStrategy(start_method="forkserver")


@pytest.fixture
def ranked_batches(monkeypatch: pytest.MonkeyPatch) -> list:
    """The ranked batches (``RankedBatch``) that the measure plan builds during the test, in order (a
    spy on ``measures/plan.py``'s ``prepare``): which ranking a route took, e.g. a head only."""
    import torch_rankeval.measures.plan as plan_module

    seen: list = []
    original = plan_module.prepare

    def spy(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        out = original(*args, **kw)
        seen.append(out[0])
        return out

    monkeypatch.setattr(plan_module, "prepare", spy)
    return seen


# ------------------------------------------------------------------ the oldest-torchmetrics subset
# `.ci/run` runs the whole suite once against the newest torchmetrics, then only the items marked
# `torchmetrics` (`-m "torchmetrics and not slow"`) against the OLDEST supported torchmetrics (the
# lower bound in pyproject.toml). The measures' values are computed by our own kernels and checked against
# pytrec_eval, sklearn, ranx, ... whatever torchmetrics is installed, so running them twice proves
# nothing more; what a torchmetrics upgrade or downgrade can break is where we meet its code: the
# private hooks we override (metrics/_hooks.py), the compat module (compat/torchmetrics.py), the
# Metric contract of our classes (update/compute/reset/forward, pickling and state, merge_state,
# MetricCollection compute groups, distributed sync), Lightning's logging of Metric objects, and the
# `convention="torchmetrics"` preset against torchmetrics' own functions. Each module below is in the
# subset for the reason given (a module outside it may mark single tests `@pytest.mark.torchmetrics`);
# tests/test_suite_selection.py checks that every test module that imports torchmetrics' classes or
# our compat module is either here or in NOT_IN_OLDEST_TORCHMETRICS with its reason.
OLDEST_TORCHMETRICS = {
    "test_hooks.py": "each private torchmetrics hook we override still exists and runs our override",
    "test_compat_torchmetrics.py": "compat/torchmetrics.py against torchmetrics' own Retrieval* classes",
    "test_metrics.py": "the Metric classes against torchmetrics' classes and its Metric contract",
    "test_metric_compute_groups.py": "MetricCollection compute groups (torchmetrics' state comparison)",
    "test_pickle_and_state.py": "pickle, deepcopy, state_dict, load_state_dict, merge_state",
    "test_state_configuration.py": "the foreign-state refusal in load_state_dict, merge_state, collections",
    "test_metrics_distributed.py": "distributed sync (_sync_dist, gather_all_tensors) under gloo",
    "test_all_skipped.py": "every query skipped: torchmetrics' RetrievalMetric.compute is the oracle",
    "test_presets.py": 'convention="torchmetrics" against torchmetrics\' functional retrieval metrics',
    "test_functional_peers.py": "the functional metrics against torchmetrics' functional retrieval metrics",
    "test_plot.py": "plot() through torchmetrics' plot utilities",
    "test_lightning_callback.py": "the Lightning callback, which updates, syncs and resets the Metric classes",
    "test_lightning_log_dict.py": "Lightning's self.log / log_dict of Metric objects and MetricCollections",
    "test_reliability3.py": "compat.torchmetrics' functional API and curve classes against torchmetrics' own, "
    "the callback's dataloader slots",
    "test_one_input_stage.py": "the compat curve classes' input checks against the compat Retrieval* classes' "
    "(torchmetrics' messages), beside the metrics that share RankingMetrics' input stage",
}
# Test modules that import torchmetrics' classes but stay out of the oldest run, and why.
NOT_IN_OLDEST_TORCHMETRICS = {
    "test_signatures.py": "the classes' signatures and docstrings: our source, not torchmetrics' behaviour",
    "test_debiased_metrics.py": "the debiased classes' values; their Metric contract is the one test_metrics "
    "and test_pickle_and_state check on the same ConfiguredMetric base",
    "test_windows.py": "window values against numpy; MetricCollection use is covered by the compute-group tests",
    "test_lightning_ddp_spawn_metrics.py": "two spawned DDP processes (the slowest kind of test): the sync it "
    "relies on is test_metrics_distributed's, the pickling into the processes test_pickle_and_state's",
    "test_beyond_trec.py": "AUROC / fall-out values; the compat classes' AUROC is test_compat_torchmetrics'",
    "test_rectools_defs.py": "RecTools' expected values through RankingMetrics; its checkpoint test loads a "
    "state_dict, whose refusal of foreign state test_state_configuration covers",
    "test_monitoring.py": "standard errors against scipy (two of its items compile the update with inductor); "
    "its two tests of the overridden _wrap_compute cache are marked one by one",
}
# The doctests of the modules built on torchmetrics are in the subset too.
OLDEST_TORCHMETRICS_PACKAGE = ("torch_rankeval/metrics/", "torch_rankeval/compat/", "torch_rankeval/lightning.py")


@pytest.hookimpl(tryfirst=True)  # before the `-m` selection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path).resolve()
        if path.parent == REPO / "tests":
            selected = path.name in OLDEST_TORCHMETRICS
        else:
            relative = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else ""
            selected = relative.startswith(OLDEST_TORCHMETRICS_PACKAGE)
        if selected:
            item.add_marker(pytest.mark.torchmetrics)
