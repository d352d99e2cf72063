"""Learning-to-rank data: documents grouped by query, a LETOR/SVMlight reader and a synthetic set.

Pure torch (no Lightning): :class:`QueryDataset` and :func:`collate_queries` give padded batches
``{"features", "target", "mask", "indexes"}``; :func:`read_letor` / :func:`write_letor` read and
write MSLR-WEB10K/30K, Yahoo! LTR, istella and LETOR files; :func:`synthetic_ltr` draws a seeded
synthetic set with a documented generative model.

Example:
    >>> from torch.utils.data import DataLoader
    >>> from torch_rankeval.data import collate_queries, synthetic_ltr
    >>> batch = next(iter(DataLoader(synthetic_ltr(8, seed=0), batch_size=4, collate_fn=collate_queries)))
    >>> sorted(batch), batch["features"].shape[0]
    (['features', 'indexes', 'mask', 'target'], 4)
"""

from torch_rankeval.data.dataset import QueryDataset, collate_queries
from torch_rankeval.data.letor import read_letor, write_letor
from torch_rankeval.data.synthetic import synthetic_ltr

__all__ = ["QueryDataset", "collate_queries", "read_letor", "write_letor", "synthetic_ltr"]
