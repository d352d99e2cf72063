"""Measure kernels (layer 2): one module per measure family, pure tensor code on a ranked view.

Every kernel has one signature, ``kernel(rb, ks, conv, **params) -> (values, empty)``: it reads a
ranked view ``rb`` (:mod:`torch_rankeval.ranking.view`) at the cutoffs ``ks`` (a tuple of ints,
``None`` for the whole list; the recall levels or multiples of R for a family whose ``@`` sets a
parameter) under the convention ``conv``, and returns per-query values ``(N, K)`` and the empty
flags ``(N, 1)`` or ``(N, K)`` bool (``None``: the measure has no empty case). ``params`` are the
family's parameters that set no convention field (``ERR(max_grade=5)``, ``RBP(p=0.8)``).
The measure registry (:mod:`torch_rankeval.measures.registry`) names each family's kernel, and the
plan (:mod:`torch_rankeval.measures.plan`) calls it. No Python loop over queries, no host sync.
"""
