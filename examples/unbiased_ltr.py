"""Unbiased learning to rank from position-biased clicks: IPS-weighted LambdaLoss against raw clicks.

Run (from the repository root, about 10 s on one CPU core)::

    python examples/unbiased_ltr.py

The world is the synthetic LTR set (:func:`torch_rankeval.data.synthetic_ltr`), whose true grades are
hidden from the learners. A logging ranker that mixes relevance with a feature direction unrelated
to it shows each query's documents in a Plackett-Luce order, many sessions per query; users
examine position ``p`` with probability ``1 / p`` (the position-based model) and click an examined
document with probability ``(2^grade - 1) / 15``. From those clicks alone:

1. :func:`torch_rankeval.propensity.pbm_em` estimates the examination propensities by position;
2. :func:`torch_rankeval.functional.ips_gains` turns each click into ``1 / max(rho, clip)`` at its
   logged position (the debiased metric's clipping), summed per (query, document): per-query
   aggregation first, as the debiasing guide asks of normalised losses and metrics;
3. two MLP rankers are trained with :func:`torch_rankeval.losses.lambda_loss`: one on the raw click
   counts, one on the same counts with ``weights=`` the mean inverse propensity of each document's
   clicks (so that ``weights * clicks`` is the document's debiased gain).

Each epoch prints, on held-out queries with their own click log, the debiased nDCG@10 (what a
practitioner can measure from clicks) and the true nDCG@10 (from the hidden grades). The IPS
ranker learns relevance; the raw-click ranker also learns the logger's bias.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import Tensor, nn

from torch_rankeval import functional as F
from torch_rankeval import losses
from torch_rankeval.data import synthetic_ltr
from torch_rankeval.propensity import pbm_em


def simulate_clicks(
    features: Tensor,
    grades: Tensor,
    mask: Tensor,
    *,
    sessions: int,
    eta: float,
    bias: Tensor,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """``(clicks, positions)`` of ``sessions`` logged sessions per query, each ``(Q, S, L)``: a
    Plackett-Luce logger on ``0.5 * grade + features @ bias``, the position-based click model."""
    q, length = grades.shape
    logger = (0.5 * grades + features @ bias).masked_fill(~mask, float("-inf"))
    gumbel = -torch.log(-torch.log(torch.rand(q, sessions, length, generator=generator)))
    order = (logger[:, None, :] + gumbel).argsort(dim=2, descending=True)
    positions = torch.empty_like(order).scatter_(2, order, torch.arange(1, length + 1).expand_as(order))
    examined = torch.rand(q, sessions, length, generator=generator) < positions.float() ** -eta
    relevant = torch.rand(q, sessions, length, generator=generator) < ((torch.exp2(grades) - 1) / 15)[:, None, :]
    clicks = examined & relevant & mask[:, None, :]
    return clicks.long(), positions


def estimate_propensities(clicks: Tensor, positions: Tensor, mask: Tensor) -> Tensor:
    """``rho(p) / rho(1)`` by position, from the click log alone (tabular EM over (document, position))."""
    q, s, length = clicks.shape
    items = torch.arange(q * length).reshape(q, 1, length).expand(q, s, length)
    keep = mask[:, None, :].expand(q, s, length)
    theta, _ = pbm_em(
        items[keep], positions[keep], clicks[keep].float(), num_items=q * length, num_positions=length, iters=100
    )
    return theta.nan_to_num(nan=float(theta[torch.isfinite(theta)].min()))  # positions never shown


def debiased_gains(clicks: Tensor, positions: Tensor, mask: Tensor, theta: Tensor, clip: float) -> Tensor:
    """Per (query, document): ``sum_sessions c / max(rho(logged position), clip)``."""
    rho = theta[(positions - 1).clamp(max=theta.shape[0] - 1)].clamp(max=1.0)
    rho = torch.where(mask[:, None, :], rho, torch.ones_like(rho))
    return F.ips_gains(clicks, rho, clip=clip, mask=mask[:, None, :].expand_as(clicks)).sum(1)


def make_ranker(n_features: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_features, 32), nn.ReLU(), nn.Linear(32, 1))


def evaluate(model: nn.Module, data: dict[str, Tensor], gains: Tensor) -> tuple[float, float]:
    """(debiased nDCG@10 from the held-out clicks, true nDCG@10 from the grades)."""
    with torch.no_grad():
        preds = model(data["features"]).squeeze(-1)
    debiased = F.ndcg(preds, gains, k=10, mask=data["mask"], gain="linear", empty_target_action="skip")
    true = F.ndcg(preds, data["target"], k=10, mask=data["mask"])
    return debiased.item(), true.item()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-queries", type=int, default=400)
    parser.add_argument("--test-queries", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=50, help="logged sessions per training query")
    parser.add_argument("--test-sessions", type=int, default=1000, help="logged sessions per held-out query")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--eta", type=float, default=1.0, help="true position bias: rho(p) = p^-eta")
    parser.add_argument("--clip", type=float, default=0.1, help="propensity clipping (weights <= 1/clip)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    train = synthetic_ltr(args.train_queries, n_features=16, min_docs=10, max_docs=20, seed=args.seed).padded()
    test = synthetic_ltr(args.test_queries, n_features=16, min_docs=10, max_docs=20, seed=args.seed + 1).padded()
    for split in (train, test):
        split["features"] = (split["features"] - train["features"].mean((0, 1))) / train["features"].std((0, 1))
        split["target"] = split["target"].float()
    bias = torch.randn(16, generator=g)
    bias = 1.5 * bias / bias.norm()  # the logger's preference unrelated to relevance

    logs = {}
    for name, split, sessions in (("train", train, args.sessions), ("test", test, args.test_sessions)):
        logs[name] = simulate_clicks(
            split["features"], split["target"], split["mask"], sessions=sessions, eta=args.eta, bias=bias, generator=g
        )
    theta = estimate_propensities(*logs["train"], train["mask"])
    true_theta = torch.arange(1, 6, dtype=torch.float) ** -args.eta
    print("propensity rho(p)/rho(1), p = 1..5: EM " + " ".join(f"{v:.3f}" for v in theta[:5].tolist()), end="")
    print("   true " + " ".join(f"{v:.3f}" for v in true_theta.tolist()))

    clicks = logs["train"][0].sum(1).float()  # click counts per (query, document)
    ips = debiased_gains(*logs["train"], train["mask"], theta, args.clip)
    weights = torch.where(clicks > 0, ips / clicks.clamp_min(1), torch.ones_like(ips))  # mean 1/rho of its clicks
    test_gains = debiased_gains(*logs["test"], test["mask"], theta, args.clip)

    rankers = {"raw clicks": (make_ranker(16, args.seed), None), "IPS": (make_ranker(16, args.seed), weights)}
    history: dict[str, list[tuple[float, float]]] = {name: [] for name in rankers}
    optimizers = {name: torch.optim.Adam(model.parameters(), lr=1e-2) for name, (model, _) in rankers.items()}
    batch = 32
    print(f"{'epoch':>5}  {'raw: debiased':>13} {'true':>6}   {'IPS: debiased':>13} {'true':>6}   (nDCG@10, held out)")
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(args.train_queries, generator=g)
        for start in range(0, args.train_queries, batch):
            rows = perm[start : start + batch]
            for name, (model, w) in rankers.items():
                preds = model(train["features"][rows]).squeeze(-1)
                loss = losses.lambda_loss(
                    preds,
                    clicks[rows],
                    10,
                    mask=train["mask"][rows],
                    weights=None if w is None else w[rows],
                    gain="linear",
                    validate_args=False,
                )
                optimizers[name].zero_grad()
                loss.backward()
                optimizers[name].step()
        for name, (model, _) in rankers.items():
            history[name].append(evaluate(model, test, test_gains))
        (rd, rt), (idb, it) = history["raw clicks"][-1], history["IPS"][-1]
        print(f"{epoch:>5}  {rd:>13.4f} {rt:>6.4f}   {idb:>13.4f} {it:>6.4f}")
    logger_scores = 0.5 * test["target"] + test["features"] @ bias
    logger_true = F.ndcg(logger_scores, test["target"], k=10, mask=test["mask"]).item()
    print(f"logging ranker: true nDCG@10 {logger_true:.4f}")
    return {"history": history, "theta": theta, "logger_true": logger_true}


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
