"""Peak memory on skewed input: flat (``indexes``) metric updates and TREC runs with one huge query.

Every case runs in its own fresh process and reports its peak resident set size (``ru_maxrss``),
the resident size after imports and a tiny warm-up (``base``), their difference (what the data
costs) and the wall time. Cases:

- ``flat_*``: one query with ``--flat-big`` documents plus ``--flat-big`` one-document queries,
  flat (torchmetrics-style) input through ``NDCG().update(preds, target, indexes=...)`` +
  ``compute``; ``flat_uniform_ours`` feeds the same number of documents in equal queries (the
  data's own cost); ``flat_torchmetrics`` is ``RetrievalNormalizedDCG`` on the skewed input.
- ``trec_*``: a run of ``--trec-big`` documents for one query plus ``--trec-small`` queries of
  ``--trec-small-docs`` documents (2,000,000 lines by default), with its qrels, evaluated from the
  files for nDCG@10, AP, RR, P@10 and R@100: ``trec_ours`` (``read_qrels`` + ``read_run`` +
  ``trec.evaluate`` in-process), ``trec_cli`` (the ``torch-rankeval evaluate`` process, measured
  from its parent) and ``trec_pytrec_eval`` (``parse_qrel``/``parse_run`` + ``evaluate``).
- ``docno_*``: a small run (50,000 lines) in which one docno is 10,000 characters long.
- ``diversity_*``: intent-aware measures (alpha-nDCG@20, ERR-IA@20, NRBP, P-IA@10, StRecall@10) through
  ``trec.evaluate`` on diversity qrels of 60 queries x 8 subtopics (300 judged documents each) and a run
  of 1,000 documents per query: ``diversity_unique`` numbers the subtopics uniquely across the file
  (query ``q`` holds ``8q + 1 .. 8q + 8``), ``diversity_per_query`` numbers them 1..8 in every query.
  The same judgments, so the same values; memory must not depend on the labels.
  ``diversity_sparse_*``: the same shape as tensors, a sparse ``subtopic_target`` through ``F.evaluate``
  (ties "first"), its subtopic indices unique across the lists (``8q + j``) or ``0..7`` in every list.
- ``catalogue_whole_list``: whole-list measures (``RankingMetrics(("ndcg", "map", "mrr"))``, no cutoff)
  on the catalogue route: 200 users x 50,000 items of float32 scores (38 MiB), a sparse target of 20
  items and a sparse ``exclude`` of 50 items per user, one validated ``update`` (issue 27 item 6:
  a full sort of the rows costs about 3 times the scores; the data column should stay within that).

    PYTHONPATH=. python benchmarks/bench_memory.py                 # every case
    PYTHONPATH=. python benchmarks/bench_memory.py --cases flat_ours,trec_ours

Values are checked against each other (every case of a group prints the same means to 1e-9).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEASURES = ["ndcg_cut.10", "map", "recip_rank", "P.10", "recall.100"]
NAMES = ["ndcg_cut_10", "map", "recip_rank", "P_10", "recall_100"]
CASES = (
    "flat_ours",
    "flat_uniform_ours",
    "flat_torchmetrics",
    "trec_ours",
    "trec_cli",
    "trec_pytrec_eval",
    "docno_ours",
    "docno_pytrec_eval",
    "catalogue_whole_list",
)
DIVERSITY_CASES = ("diversity_unique", "diversity_per_query", "diversity_sparse_unique", "diversity_sparse_per_list")
DIVERSITY_MEASURES = ["alpha_nDCG@20", "ERR_IA@20", "NRBP", "P_IA@10", "StRecall@10"]
CASES += DIVERSITY_CASES


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- data
def flat_data(big: int, uniform: bool = False):
    """``(preds, target, indexes)``: one query of ``big`` documents plus ``big`` one-document
    queries (or, ``uniform``, the same ``2 * big`` documents in queries of 100)."""
    import torch

    g = torch.Generator().manual_seed(0)
    n = 2 * big
    preds, target = torch.rand(n, generator=g), torch.randint(0, 3, (n,), generator=g)
    if uniform:
        indexes = torch.arange(n) // 100
    else:
        indexes = torch.cat([torch.zeros(big, dtype=torch.long), torch.arange(1, big + 1)])
    return preds, target, indexes


def trec_data(data_dir: Path, big: int, small: int, small_docs: int, seed: int = 0) -> tuple[Path, Path]:
    """A qrels and a run file (written once): query ``q0`` retrieves ``big`` documents (1,000 of
    them judged), ``small`` queries retrieve ``small_docs`` each (10 judged, half retrieved)."""
    import numpy as np

    data_dir.mkdir(parents=True, exist_ok=True)
    run_path = data_dir / f"skewed_run_{big}_{small}x{small_docs}_s{seed}.txt"
    qrels_path = data_dir / f"skewed_qrels_{big}_{small}x{small_docs}_s{seed}.txt"
    if run_path.exists() and qrels_path.exists():
        return qrels_path, run_path
    rng = np.random.default_rng(seed)
    tmp_run, tmp_qrels = run_path.with_suffix(".tmp"), qrels_path.with_suffix(".tmp")
    with open(tmp_run, "w") as run, open(tmp_qrels, "w") as qrels:
        sizes = [(0, big)] + [(i, small_docs) for i in range(1, small + 1)]
        for q, n in sizes:
            docs = rng.permutation(10 * n)[:n] + 1_000_000
            scores = np.round(np.sort(rng.normal(10, 3, n))[::-1], 6)
            run.write(
                "".join(
                    f"q{q} Q0 {d} {r} {s:.6f} skew\n" for r, (d, s) in enumerate(zip(docs.tolist(), scores.tolist()), 1)
                )
            )
            n_judged = min(1000, max(10, n // 1000))
            judged = np.concatenate(
                [docs[rng.choice(n, min(n, n_judged // 2), replace=False)], rng.integers(0, 10**7, n_judged // 2)]
            )
            grades = rng.integers(0, 4, len(judged))
            qrels.write("".join(f"q{q} 0 {d} {g}\n" for d, g in dict(zip(judged.tolist(), grades.tolist())).items()))
    os.replace(tmp_run, run_path)
    os.replace(tmp_qrels, qrels_path)
    return qrels_path, run_path


def docno_data(data_dir: Path) -> tuple[Path, Path]:
    """A 1 MiB run of 1,000 queries x 50 documents plus one document whose docno has 10,000 characters."""
    data_dir.mkdir(parents=True, exist_ok=True)
    run_path, qrels_path = data_dir / "longdocno_run.txt", data_dir / "longdocno_qrels.txt"
    if not (run_path.exists() and qrels_path.exists()):
        with open(run_path, "w") as f:
            f.writelines(f"q{q} Q0 d{d} {d + 1} {1 - d / 100:.3f} t\n" for q in range(1000) for d in range(50))
            f.write(f"q0 Q0 {'x' * 10_000} 99 0.0 t\n")
        with open(qrels_path, "w") as f:
            f.write("".join(f"q{q} 0 d1 1\nq{q} 0 d7 2\n" for q in range(1000)))
    return qrels_path, run_path


def diversity_data(data_dir: Path, queries: int = 60, subtopics: int = 8, docs: int = 1000) -> tuple[Path, Path, Path]:
    """Diversity qrels numbered uniquely across the file and per query (the same judgments), and a run:
    ``queries`` queries of ``docs`` documents, 300 judged documents each (half retrieved), judged on
    every one of the query's ``subtopics`` subtopics (relevant with chance 0.15)."""
    import numpy as np

    data_dir.mkdir(parents=True, exist_ok=True)
    stem = f"diversity_{queries}x{subtopics}_{docs}"
    unique, per_query, run_path = (data_dir / f"{stem}_{name}.txt" for name in ("unique", "per_query", "run"))
    if unique.exists() and per_query.exists() and run_path.exists():
        return unique, per_query, run_path
    rng = np.random.default_rng(0)
    run_lines, unique_lines, per_query_lines = [], [], []
    for q in range(queries):
        retrieved = rng.permutation(10 * docs)[:docs]
        scores = np.round(np.sort(rng.normal(10, 3, docs))[::-1], 6)
        run_lines += [
            f"q{q} Q0 d{d} {r} {s:.6f} div\n" for r, (d, s) in enumerate(zip(retrieved.tolist(), scores.tolist()), 1)
        ]
        judged = np.concatenate(
            [rng.choice(retrieved, 150, replace=False), 10 * docs + rng.choice(10 * docs, 150, replace=False)]
        )
        grades = rng.random((len(judged), subtopics)) < 0.15
        for d, row in zip(judged.tolist(), grades.tolist()):
            for j, g in enumerate(row):
                unique_lines.append(f"q{q} {q * subtopics + j + 1} d{d} {int(g)}\n")
                per_query_lines.append(f"q{q} {j + 1} d{d} {int(g)}\n")
    for path, lines in ((unique, unique_lines), (per_query, per_query_lines), (run_path, run_lines)):
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(lines))
        os.replace(tmp, path)
    return unique, per_query, run_path


def _diversity_sparse(case: str) -> dict:
    import torch

    from torch_rankeval import functional as F
    from torch_rankeval.ranking.subtopics import subtopic_target

    g = torch.Generator().manual_seed(0)
    n, length, subtopics, judged = 60, 1000, 8, 300
    preds = torch.rand(n, length, generator=g, dtype=torch.float64)
    q = torch.arange(n).repeat_interleave(judged * subtopics)
    d = torch.arange(judged).repeat_interleave(subtopics).repeat(n)
    s = torch.arange(subtopics).repeat(n * judged)
    grade = (torch.rand(q.shape, generator=g) < 0.15).long()
    spread = subtopics if case == "diversity_sparse_unique" else 0
    width = subtopics + spread * (n - 1)
    target = subtopic_target(q, s + spread * q, d, grade, shape=(n, length, width))
    ideal = subtopic_target(q, s + spread * q, d, grade, shape=(n, judged, width))
    F.evaluate(preds[:1, :5], torch.ones(1, 5, 2, dtype=torch.long), "alpha_nDCG@3")
    base = _rss_mb()
    start = time.perf_counter()
    out = F.evaluate(preds, target, DIVERSITY_MEASURES, ideal_target=ideal, ties="first")
    values = {k: float(v) for k, v in out.items()}
    return {"seconds": time.perf_counter() - start, "base_mb": base, "values": values}


def _diversity(case: str, args) -> dict:
    if case.startswith("diversity_sparse_"):
        return _diversity_sparse(case)
    from torch_rankeval import trec
    from torch_rankeval.trec.diversity import SubtopicQrels, read_subtopic_qrels

    unique, per_query, run = diversity_data(args.data_dir)
    tiny = SubtopicQrels.from_rows([("q", 1, "d", 1)])
    trec.evaluate(tiny, trec.Run.from_dict({"q": {"d": 1.0}}), DIVERSITY_MEASURES)
    base = _rss_mb()
    start = time.perf_counter()
    qrels = read_subtopic_qrels(unique if case == "diversity_unique" else per_query)
    result = trec.evaluate(qrels, trec.read_run(run), DIVERSITY_MEASURES)
    values = {n: result.summary[n] for n in DIVERSITY_MEASURES}
    return {"seconds": time.perf_counter() - start, "base_mb": base, "values": values}


# ----------------------------------------------------------------------------- workers (one per process)
def _flat(args, uniform: bool = False, peer: bool = False) -> dict:
    import torch

    preds, target, indexes = flat_data(args.flat_big, uniform)
    if peer:
        from torchmetrics.retrieval import RetrievalNormalizedDCG

        make = RetrievalNormalizedDCG
    else:
        from torch_rankeval import NDCG

        def make():
            return NDCG(gain="linear", ties="first")

    warm = make()
    warm.update(preds[:4], target[:4], indexes=indexes[:4])
    warm.compute()
    base = _rss_mb()
    start = time.perf_counter()
    metric = make()
    metric.update(preds, target, indexes=indexes)
    value = float(metric.compute())
    return {
        "seconds": time.perf_counter() - start,
        "base_mb": base,
        "values": {"ndcg": value},
        "torch": torch.__version__,
    }


def _trec_ours(qrels: str, run: str) -> dict:
    from torch_rankeval import trec

    trec.evaluate(trec.Qrels.from_dict({"q": {"d": 1}}), trec.Run.from_dict({"q": {"d": 1.0}}), MEASURES)
    base = _rss_mb()
    start = time.perf_counter()
    result = trec.evaluate(trec.read_qrels(qrels), trec.read_run(run), MEASURES)
    values = {n: result.summary[n] for n in NAMES}
    return {"seconds": time.perf_counter() - start, "base_mb": base, "values": values}


def _trec_cli(qrels: str, run: str) -> dict:
    cmd = [sys.executable, "-m", "torch_rankeval", "evaluate", qrels, run, "--format", "trec"]
    cmd += [a for m in MEASURES for a in ("-m", m)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    printed = {line.split()[0]: float(line.split()[2]) for line in done.stdout.splitlines()}
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"seconds": seconds, "base_mb": float("nan"), "peak_mb": peak, "values": {n: printed[n] for n in NAMES}}


def _trec_pytrec_eval(qrels: str, run: str) -> dict:
    import pytrec_eval

    base = _rss_mb()
    start = time.perf_counter()
    with open(qrels) as f:
        q = pytrec_eval.parse_qrel(f)
    with open(run) as f:
        r = pytrec_eval.parse_run(f)
    per_query = pytrec_eval.RelevanceEvaluator(q, set(MEASURES)).evaluate(r)
    values = {n: statistics.fmean(v[n] for v in per_query.values()) for n in NAMES}
    return {"seconds": time.perf_counter() - start, "base_mb": base, "values": values}


def _catalogue_whole_list() -> dict:
    """Issue 27 item 6: whole lists on the catalogue route, sparse target and sparse ``exclude``."""
    import torch

    from torch_rankeval import RankingMetrics
    from torch_rankeval.ranking.sparse import sparse_from_ids

    users, items = 200, 50_000
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(users, items, generator=g)
    ids = torch.stack([torch.randperm(items, generator=g)[:70] for _ in range(users)])  # setup: one row at a time
    target = sparse_from_ids(ids[:, :20], num_items=items)
    exclude = sparse_from_ids(ids[:, 20:], num_items=items, grades=torch.ones(users, 50, dtype=torch.bool))
    warm = RankingMetrics(("ndcg", "map", "mrr"))
    head = torch.arange(2)
    warm.update(scores[:2], target.index_select(0, head), exclude=exclude.index_select(0, head))
    base = _rss_mb()
    start = time.perf_counter()
    metric = RankingMetrics(("ndcg", "map", "mrr"))
    metric.update(scores, target, exclude=exclude)
    values = {k: float(v) for k, v in metric.compute().items()}
    return {"seconds": time.perf_counter() - start, "base_mb": base, "values": values}


def _worker(case: str, args) -> dict:
    if case in DIVERSITY_CASES:
        return _diversity(case, args)
    if case == "catalogue_whole_list":
        return _catalogue_whole_list()
    if case.startswith("flat_"):
        return _flat(args, uniform=case == "flat_uniform_ours", peer=case == "flat_torchmetrics")
    if case.startswith("trec_"):
        qrels, run = trec_data(args.data_dir, args.trec_big, args.trec_small, args.trec_small_docs)
    else:
        qrels, run = docno_data(args.data_dir)
    tool = case.split("_", 1)[1]
    return {"ours": _trec_ours, "cli": _trec_cli, "pytrec_eval": _trec_pytrec_eval}[tool](str(qrels), str(run))


def _run_case(case: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, __file__, "--worker", case, "--data-dir", str(args.data_dir)]
    cmd += ["--flat-big", str(args.flat_big), "--trec-big", str(args.trec_big)]
    cmd += ["--trec-small", str(args.trec_small), "--trec-small-docs", str(args.trec_small_docs)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--flat-big", type=int, default=8000)
    parser.add_argument("--trec-big", type=int, default=1_000_000)
    parser.add_argument("--trec-small", type=int, default=100_000)
    parser.add_argument("--trec-small-docs", type=int, default=10)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "torch_rankeval_bench"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        out = _worker(args.worker, args)
        out.setdefault("peak_mb", _rss_mb())
        print(json.dumps(out))
        return
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; choose from {CASES}")
    if any(c.startswith("trec_") for c in cases):
        _, run = trec_data(args.data_dir, args.trec_big, args.trec_small, args.trec_small_docs)
        with open(run, "rb") as f:
            lines = sum(1 for _ in f)
        print(f"# trec: {lines:,} run lines ({run.stat().st_size / 2**20:.0f} MiB), largest query {args.trec_big:,}")
    print(f"# flat: one query of {args.flat_big:,} documents + {args.flat_big:,} one-document queries")
    print(f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print("\n| case | peak RSS (MiB) | after imports (MiB) | data (MiB) | time (s) | values |")
    print("|---|---|---|---|---|---|")
    for case in cases:
        r = _run_case(case, args)
        if "error" in r:
            print(f"| {case} | failed: {r['error']} | | | | |", flush=True)
            continue
        values = ", ".join(f"{k} {v:.6f}" for k, v in r["values"].items())
        data = r["peak_mb"] - r["base_mb"]
        print(
            f"| {case} | {r['peak_mb']:.0f} | {r['base_mb']:.0f} | {data:.0f} | {r['seconds']:.2f} | {values} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
