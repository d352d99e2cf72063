"""Measure kernels (layer 2): one module per measure family, pure tensor code on a ranked view.

A kernel reads a ranked view (:mod:`torch_rankeval.ranking.view`) at the cutoffs it is given and
returns per-query values ``(N, K)``; the measure registry (:mod:`torch_rankeval.measures.registry`)
names each family's kernel, and the plan (:mod:`torch_rankeval.measures.plan`) calls it.
No Python loop over queries, no host sync.
"""
