"""Names of the conventions' and diagnostics' options, importable without torch.

The command line lists these as argument choices in its ``--help``, which must answer without
importing torch. :mod:`torch_rankeval.conventions` and :mod:`torch_rankeval.diagnostics` import them from here
(the preset names are checked against ``conventions.PRESETS`` by a test), and
:mod:`torch_rankeval.trec.evaluation` the trec_eval versions it reproduces; plain strings only, no
other imports here.

Example:
    >>> from torch_rankeval._choices import PRESET_NAMES, TIES
    >>> PRESET_NAMES
    ('ir_measures', 'lightgbm', 'ranx', 'sklearn', 'torchmetrics', 'torchmetrics_1.7', 'trec_eval')
    >>> "average" in TIES
    True
"""

__all__ = ["GAINS", "INVERSION_STATS", "PRESET_NAMES", "TIES", "TREC_EVAL_VERSIONS"]

TIES = ("average", "first", "pessimistic", "optimistic")
GAINS = ("exp2", "linear")
# sorted(conventions.PRESETS)
PRESET_NAMES = ("ir_measures", "lightgbm", "ranx", "sklearn", "torchmetrics", "torchmetrics_1.7", "trec_eval")
INVERSION_STATS = ("relevance", "gain", "relevant_share")
TREC_EVAL_VERSIONS = ("10.0", "9.0.8")  # trec.evaluate's trec_eval_version
