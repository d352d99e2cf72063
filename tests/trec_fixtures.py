"""Random qrels/runs for the TREC tests: ties, unretrieved relevant documents, negative grades,
queries only in the run or only in the qrels, and docnos of many lengths (shared prefixes, longer
than one 8-byte key column)."""

from __future__ import annotations

import random


def random_collection(seed: int, *, n_queries: int = 40, max_docs: int = 30, tie_levels: int = 6):
    """``(qrels, run)`` dicts in pytrec_eval's format."""
    rng = random.Random(seed)
    prefixes = ["d", "DOC-", "clueweb12-0000tw-", "x"]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for i in range(n_queries):
        q = f"{rng.choice(['', 'q', 'topic-'])}{i}"
        docs = sorted({f"{rng.choice(prefixes)}{rng.randrange(60)}" for _ in range(rng.randrange(1, max_docs))})
        rng.shuffle(docs)
        n_ret = rng.randrange(0, len(docs) + 1)
        retrieved, others = docs[:n_ret], docs[n_ret:]
        if i % 9 != 8:  # every ninth query is missing from the qrels
            judged = rng.sample(retrieved, k=len(retrieved) // 2) + others[: rng.randrange(len(others) + 1)]
            qrels[q] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3, 4]) for d in judged}
            if not qrels[q]:
                qrels[q] = {"never-retrieved": 1}
        if retrieved and i % 7 != 6:  # every seventh query is missing from the run
            # few score levels: many ties, broken by docno
            run[q] = {d: round(rng.randrange(tie_levels) * 0.25 - 0.5, 2) for d in retrieved}
    return qrels, run


def write_dicts(tmp_path, qrels, run, tag="rnd"):
    from torch_rankeval.trec import write_qrels, write_run

    qrels_path, run_path = tmp_path / "qrels.txt", tmp_path / "run.txt"
    write_qrels(qrels_path, qrels)
    write_run(run_path, run, tag=tag)
    return qrels_path, run_path


def graded_collection(seed: int, *, n_queries: int = 25, max_docs: int = 25):
    """``(qrels, run)`` dicts: grades 0 to 3, every eighth query only in the run, every fifth (and those
    retrieving nothing) only in the qrels (``-c`` adds them), six score levels (ties, broken by docno)."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for i in range(n_queries):
        q = f"q{i}"
        docs = sorted({f"d{rng.randrange(60)}" for _ in range(rng.randrange(1, max_docs))})
        rng.shuffle(docs)
        n_ret = rng.randrange(0, len(docs) + 1)
        retrieved, others = docs[:n_ret], docs[n_ret:]
        if i % 8 != 7:
            judged = rng.sample(retrieved, k=len(retrieved) // 2) + others[: rng.randrange(len(others) + 1)]
            qrels[q] = {d: rng.choice([0, 0, 1, 1, 2, 3]) for d in (judged or ["never-retrieved"])}
        if retrieved and i % 5 != 4:
            run[q] = {d: round(rng.randrange(6) * 0.25, 2) for d in retrieved}
    return qrels, run
