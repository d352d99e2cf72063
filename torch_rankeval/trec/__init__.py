"""TREC files: qrels and run readers and writers (:mod:`.io`), the join into padded tensors
(:mod:`.join`) and trec_eval's evaluation (:mod:`.evaluation`).

Qrels lines are ``qid iteration docno relevance``; run lines are ``qid Q0 docno rank score tag``.
Files may be gzip-compressed (detected by content), separate fields by any whitespace (every byte
up to 0x20: spaces, tabs, CR/LF), and hold ``#`` comment lines. Reading is vectorised (numpy over
blocks of the file, parsed by a thread pool, no Python code per line), so a 10-million-line run
reads in seconds; large files show a progress bar (tqdm or rich) on a terminal. Malformed lines,
duplicate ``(qid, docno)`` pairs and empty files raise :class:`TrecFormatError` naming the file
and the line.

:func:`to_tensors` joins a run with its qrels into padded tensors in trec_eval's ranking order
(score descending, ties by docno descending, so that the ranking core's stable sort,
``ties="first"``, keeps it) together with the grades of every judged document (trec_eval's IDCG
and relevant counts). :func:`evaluate` computes measures on them:

    >>> import os, tempfile
    >>> from torch_rankeval import trec
    >>> folder = tempfile.mkdtemp()
    >>> qrels_path, run_path = os.path.join(folder, "qrels"), os.path.join(folder, "run")
    >>> trec.write_qrels(qrels_path, {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d1": 1}})
    >>> trec.write_run(run_path, {"q1": {"d1": 0.5, "d2": 0.9, "d4": 0.1}, "q2": {"d2": 0.3, "d1": 0.2}}, tag="bm25")
    >>> result = trec.evaluate(qrels_path, run_path, ["map", "ndcg_cut.3", "P.1"])
    >>> result.summary  # doctest: +ELLIPSIS
    {'map': 0.375, 'ndcg_cut_3': 0.5552..., 'P_1': 0.0}
    >>> result.per_query["map"].tolist()
    [0.25, 0.5]

Qrels and runs may also be peers' objects (pandas DataFrames with ir_measures' columns, dicts of
dicts, ranx ``Qrels``/``Run``, ir_measures' ``Qrel``/``ScoredDoc`` rows; :func:`as_qrels`,
:func:`as_run`), and measures ir_measures' measure objects.
"""

from torch_rankeval.trec._text import TrecFormatError
from torch_rankeval.trec.convert import as_measures, as_qrels, as_run
from torch_rankeval.trec.evaluation import TREC_EVAL_VERSIONS, Evaluation, Output, evaluate, trec_measures
from torch_rankeval.trec.io import Qrels, Run, read_qrels, read_run, write_qrels, write_run
from torch_rankeval.trec.join import TrecBatch, TrecBatches, to_batches, to_tensors

__all__ = [
    "TrecFormatError",
    "Qrels",
    "Run",
    "read_qrels",
    "read_run",
    "write_qrels",
    "write_run",
    "TrecBatch",
    "TrecBatches",
    "to_tensors",
    "to_batches",
    "Output",
    "Evaluation",
    "evaluate",
    "trec_measures",
    "TREC_EVAL_VERSIONS",
    "as_qrels",
    "as_run",
    "as_measures",
]
