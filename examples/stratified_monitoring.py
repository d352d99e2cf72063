"""Day-to-day monitoring of nDCG@10: an unevenly sampled evaluation set against a stratified one.

Run: ``python examples/stratified_monitoring.py`` (a few seconds on a CPU).

One fixed model is scored every day on a fresh evaluation set of 100 queries drawn from a
population with three query-frequency strata (head, torso, tail: population shares 50/30/20%).
The model is good on head queries and poor on tail ones. Nothing changes from day to day but the
sample, so every swing of the daily nDCG@10 is noise:

* **uneven**: each day's set follows that day's traffic, whose mix of head and tail queries
  wanders (a Dirichlet draw around the population shares); the plain mean over queries moves with
  the mix;
* **uneven, post-stratified**: the same sets, scored with ``strata=3`` and the population shares
  as ``stratum_weights``; ``"ndcg@10/poststratified"`` re-weights each stratum's mean, so the mix
  no longer moves it;
* **stratified**: each day's set is drawn by stratum (50 head, 30 torso, 20 tail queries): the
  plain mean of that set is already the post-stratified mean.

It prints, for each, the mean over the days, the day-to-day spread (std / mean of the daily
nDCG@10) and the average daily standard error the metric reports.
"""

from __future__ import annotations

import torch

from torch_rankeval import RankingMetrics

SHARES = torch.tensor([0.5, 0.3, 0.2])  # head, torso, tail: the population
SKILL = torch.tensor([2.0, 0.5, 0.0])  # how well the model separates relevant documents, per stratum
DAYS, QUERIES, DOCS, POOL = 30, 100, 20, 2000
#: how far a day's traffic mix wanders around the population shares (Dirichlet concentration)
CONCENTRATION = 4.0


def make_pool(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``POOL`` queries per stratum: the model's scores, graded judgments (0-3), the stratum."""
    strata = torch.arange(3).repeat_interleave(POOL)
    target = torch.randint(0, 4, (3 * POOL, DOCS), generator=generator)
    target = torch.where(torch.rand(3 * POOL, DOCS, generator=generator) < 0.7, 0, target)
    noise = torch.randn(3 * POOL, DOCS, generator=generator)
    preds = SKILL[strata].unsqueeze(1) * target + noise
    return preds, target, strata


def daily_sets(
    strata: torch.Tensor, generator: torch.Generator, stratified: bool
) -> list[torch.Tensor]:  # the query rows of each day
    days = []
    for _ in range(DAYS):
        if stratified:
            counts = (SHARES * QUERIES).round().long()
        else:
            mix = torch.distributions.Dirichlet(CONCENTRATION * SHARES).sample()
            drawn = torch.multinomial(mix, QUERIES, replacement=True, generator=generator)
            counts = torch.bincount(drawn, minlength=3).clamp(min=2)  # at least 2 a stratum: an error needs 2
        rows = [
            torch.nonzero(strata == h).reshape(-1)[torch.randperm(POOL, generator=generator)[: int(n)]]
            for h, n in enumerate(counts)
        ]
        days.append(torch.cat(rows))
    return days


def score(preds: torch.Tensor, target: torch.Tensor, strata: torch.Tensor, rows: torch.Tensor) -> dict[str, float]:
    metric = RankingMetrics(("ndcg@10",), strata=3, stratum_weights=SHARES)
    for part in rows.split(128):  # streamed in batches, as in an evaluation loop
        metric.update(preds[part], target[part], strata=strata[part])
    return {key: value.item() for key, value in metric.compute(stderr=True).items()}


def spread(values: list[float]) -> tuple[float, float]:
    t = torch.tensor(values, dtype=torch.float64)
    return t.mean().item(), (t.std() / t.mean()).item()


def main() -> None:
    torch.manual_seed(0)  # the Dirichlet draws
    generator = torch.Generator().manual_seed(0)
    preds, target, strata = make_pool(generator)
    population = score(preds, target, strata, torch.arange(3 * POOL))["ndcg@10/poststratified"]
    uneven = [score(preds, target, strata, rows) for rows in daily_sets(strata, generator, stratified=False)]
    even = [score(preds, target, strata, rows) for rows in daily_sets(strata, generator, stratified=True)]
    rows = [
        ("uneven", [d["ndcg@10"] for d in uneven], [d["ndcg@10/stderr"] for d in uneven]),
        (
            "uneven, post-stratified",
            [d["ndcg@10/poststratified"] for d in uneven],
            [d["ndcg@10/poststratified/stderr"] for d in uneven],
        ),
        ("stratified", [d["ndcg@10"] for d in even], [d["ndcg@10/poststratified/stderr"] for d in even]),
    ]
    print(f"population nDCG@10 (head/torso/tail shares 50/30/20%): {population:.4f}")
    print(f"{'evaluation set':<26}{'mean':>8}{'day-to-day std/mean':>22}{'daily stderr':>14}")
    for name, values, errors in rows:
        mean, cv = spread(values)
        print(f"{name:<26}{mean:>8.4f}{100 * cv:>21.1f}%{sum(errors) / len(errors):>14.4f}")


if __name__ == "__main__":
    main()
