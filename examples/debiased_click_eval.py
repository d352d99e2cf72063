"""Evaluate two rankers on a simulated click log: naive click nDCG versus position-debiased (IPS) nDCG.

Run: ``python examples/debiased_click_eval.py [--output PLOT.png]`` (``--help`` for the settings).

The embedded default is the simulation of the debiasing specification: 300 queries with 10
candidate documents, binary relevance (P = 0.3) with noise-free clicks, so the attractiveness
``gamma`` equals the relevance. A deterministic logging ranker (``relevance + N(0, 1)``) shows
the full list; users examine position ``p`` with probability ``p ** -eta`` (position-based model,
``eta = 1``) and click what they examine and find relevant. A new ranker (``relevance +
N(0, 0.5)``) is better than the logger. For a growing number of sessions per query, the script
aggregates the log per (query, document) with ``aggregate_ips_gains``, evaluates both rankers
with the naive click nDCG@5 (``eta=0``) and the debiased one (``eta=1``), prints a table and
saves a plot against the true nDCG@5 (from the relevance the simulation knows). The plot needs
matplotlib (the ``plot`` extra); without it the table is printed and only the figure is skipped.

The naive click nDCG rewards agreeing with the logger: it scores the logger above the better new
ranker. The debiased nDCG converges to the truth and orders the two rankers correctly.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch

from torch_rankeval import functional as F

DEFAULTS = {
    "queries": 300,
    "items": 10,
    "p_relevant": 0.3,
    "eta": 1.0,
    "logger_noise": 1.0,
    "new_noise": 0.5,
    "k": 5,
    "sessions": [1, 3, 10, 30, 100, 300, 1000, 3000],
    "seed": 0,
    "output": os.path.join(tempfile.gettempdir(), "torch_rankeval_debiased_click_eval.png"),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--queries",
        type=int,
        default=DEFAULTS["queries"],
        help="queries before dropping those without a relevant document",
    )
    parser.add_argument(
        "--sessions", type=int, nargs="+", default=DEFAULTS["sessions"], help="sessions per query to evaluate at"
    )
    parser.add_argument(
        "--eta", type=float, default=DEFAULTS["eta"], help="true position-bias exponent of the simulated users"
    )
    parser.add_argument("--k", type=int, default=DEFAULTS["k"], help="nDCG cutoff")
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    parser.add_argument("--output", default=DEFAULTS["output"], help="where to save the plot (PNG)")
    return parser.parse_args(argv)


def simulate(args: argparse.Namespace) -> dict[str, torch.Tensor]:
    """Relevance, the two rankers' scores, the logged positions and clicks of every session."""
    g = torch.Generator().manual_seed(args.seed)
    n = DEFAULTS["items"]
    rel = (torch.rand(args.queries, n, generator=g, dtype=torch.float64) < DEFAULTS["p_relevant"]).double()
    rel = rel[rel.sum(1) > 0]
    logger = rel + DEFAULTS["logger_noise"] * torch.randn(rel.shape, generator=g, dtype=torch.float64)
    new = rel + DEFAULTS["new_noise"] * torch.randn(rel.shape, generator=g, dtype=torch.float64)
    positions = logger.argsort(-1, descending=True).argsort(-1) + 1  # deterministic logger: same list every session
    p_click = positions.double() ** -args.eta * rel
    clicks = torch.bernoulli(p_click.unsqueeze(1).expand(-1, max(args.sessions), -1), generator=g).bool()
    return {"rel": rel, "logger": logger, "new": new, "positions": positions, "clicks": clicks}


def evaluate(sim: dict[str, torch.Tensor], sessions: int, eta: float, k: int) -> dict[str, float]:
    """Aggregate the first ``sessions`` sessions per query and score both rankers, naive and IPS."""
    clicks = sim["clicks"][:, :sessions]  # (Q, S, n)
    n_q, _, n = clicks.shape
    positions = sim["positions"].unsqueeze(1).expand_as(clicks)
    query_ids = torch.arange(n_q).view(-1, 1, 1).expand_as(clicks)
    doc_ids = torch.arange(n).view(1, 1, -1).expand_as(clicks)
    rows = clicks  # rows without a click add nothing to the sums: aggregate the clicked rows only
    out = {"with_click": clicks.any(-1).any(-1).double().mean().item()}
    for method, eta_used in (("naive", 0.0), ("ips", eta)):
        q, d, gains = F.aggregate_ips_gains(
            query_ids[rows],
            doc_ids[rows],
            clicks[rows],
            logged_positions=positions[rows],
            eta=eta_used,
            num_sessions=sessions,
        )
        dense = torch.zeros(n_q, n, dtype=gains.dtype).index_put_((q, d), gains)
        for ranker in ("new", "logger"):
            value = F.position_debiased_ndcg(sim[ranker], dense, k, propensities=torch.ones_like(dense))
            out[f"{ranker}_{method}"] = value.item()
    return out


def has_matplotlib() -> bool:
    """Whether the figure can be drawn (the table never needs matplotlib)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot(rows: list[dict[str, float]], sessions: list[int], truth: dict[str, float], k: int, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for ranker, color in (("new", "tab:blue"), ("logger", "tab:orange")):
        ax.plot(sessions, [r[f"{ranker}_ips"] for r in rows], "o-", color=color, label=f"{ranker} ranker: IPS")
        ax.plot(
            sessions,
            [r[f"{ranker}_naive"] for r in rows],
            "s--",
            color=color,
            alpha=0.7,
            label=f"{ranker} ranker: naive clicks",
        )
        ax.axhline(truth[ranker], color=color, linestyle=":", label=f"{ranker} ranker: true")
    ax.set_xscale("log")
    ax.set_xlabel("sessions per query")
    ax.set_ylabel(f"nDCG@{k}")
    ax.set_title("Naive vs position-debiased (IPS) nDCG from a click log")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sessions = sorted(set(args.sessions))
    if sessions[0] < 1:
        raise SystemExit("--sessions must be positive")
    sim = simulate(args)
    truth = {r: F.ndcg(sim[r], sim["rel"], args.k, gain="linear").item() for r in ("new", "logger")}
    print(
        f"nDCG@{args.k} from a simulated click log: {sim['rel'].shape[0]} queries, PBM eta={args.eta}, deterministic logger"
    )
    columns = ["sessions", "with_click", "new_naive", "new_ips", "logger_naive", "logger_ips"]
    print("  ".join(f"{c:>12}" for c in columns))
    rows = []
    for s in sessions:
        row = evaluate(sim, s, args.eta, args.k)
        rows.append(row)
        print("  ".join([f"{s:>12d}"] + [f"{row[c]:>12.4f}" for c in columns[1:]]))
    print(f"true nDCG@{args.k}: new={truth['new']:.4f} logger={truth['logger']:.4f}")
    if not has_matplotlib():  # the table above is the result; only the figure needs the extra
        print('figure skipped: matplotlib is not installed (pip install -e ".[plot]" to draw it)')
        return
    plot(rows, sessions, truth, args.k, args.output)
    print(f"plot saved to {args.output}")


if __name__ == "__main__":
    main()
