"""Drop-in replacements for peer libraries' classes, running on the streaming core of :mod:`torch_rankeval.metrics`.

:mod:`torch_rankeval.compat.torchmetrics` holds torchmetrics' ``Retrieval*`` classes with
torchmetrics' signatures and numbers: change one import line.

Example:
    >>> from torch_rankeval.compat import torchmetrics as tm
    >>> tm.RetrievalMAP(top_k=10).keys
    ['map@10']
"""

from torch_rankeval.compat import torchmetrics

__all__ = ["torchmetrics"]
