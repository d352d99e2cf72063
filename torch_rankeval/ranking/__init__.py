"""The ranking core (layer 1): the one input stage and the ranked views every measure reads.

* :mod:`~torch_rankeval.ranking.inputs`: checks and normalisation of ``preds``, ``target``,
  ``mask``, ``ignore_index``, ``ideal_target``, ``n_relevant`` and ``judged`` (every route);
* :mod:`~torch_rankeval.ranking.view`: the dense ranked view (one sort, tie groups, prefix sums);
* :mod:`~torch_rankeval.ranking.topk` and :mod:`~torch_rankeval.ranking.catalogue`: the top-k
  view of long rows and full catalogues (sparse targets, ``exclude=``), same contract;
* :mod:`~torch_rankeval.ranking.sparse`: sparse targets and exclusions;
* :mod:`~torch_rankeval.ranking.flat`: flat input (one row per document) in length buckets;
* :mod:`~torch_rankeval.ranking.clicks`: click-log inputs of the position-debiased measures.

Nothing here knows a measure: the kernels (:mod:`torch_rankeval.kernels`) read the views.
"""
