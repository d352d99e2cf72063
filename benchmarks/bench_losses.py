"""Ranking losses: loss + backward time and peak memory, ours against allRank's formulas.

The allRank columns are allRank's losses (allrank/models/losses/: listNet, listMLE, rankNet,
lambdaLoss with ``ndcgLoss2PP_scheme``, approxNDCGLoss, neuralNDCG) written here from their
published formulas (allRank is not a dependency): the same tensor operations, the whole
``(lists, L, L)`` pair tensors at once. Ours: :mod:`torch_rankeval.losses` with
``validate_args=False`` (its pairwise and sorting losses run in chunks of lists that are recomputed
in the backward pass, :data:`torch_rankeval.losses.CHUNK_ELEMENTS`).

Every case runs in a fresh process: the median wall time of ``loss(preds, target).backward()``
over ``--repeats`` runs after one warm-up, and the peak resident set size (``ru_maxrss``) minus the
resident size after the imports and a tiny warm-up (on CUDA: ``torch.cuda.max_memory_allocated``).
glibc's mmap threshold is fixed (``--malloc-threshold``) so that freed blocks go back to the system
and the resident peak is the live memory; with glibc's dynamic default (``--malloc-threshold 0``)
the heap keeps the chunks' freed blocks for reuse (resident ~1 GB for ours at 64 x 1000), but
the many chunk allocations run faster: measure time with 0 and memory with the default.
Data: ``preds ~ N(0, 1)``, grades uniform in 0..4, float32, one thread.

    PYTHONPATH=. python benchmarks/bench_losses.py                       # 64 x 100 and 64 x 1000
    PYTHONPATH=. python benchmarks/bench_losses.py --shapes 64x100 --repeats 20
    PYTHONPATH=. python benchmarks/bench_losses.py --malloc-threshold 0          # times
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
EPS = 1e-10


# ------------------------------------------------------------------------------------------ allRank's formulas
def allrank_listnet(y_pred, y_true):  # noqa: ANN001, ANN201
    preds_smax = torch.softmax(y_pred, dim=1) + EPS
    true_smax = torch.softmax(y_true, dim=1)
    return torch.mean(-torch.sum(true_smax * torch.log(preds_smax), dim=1))


def allrank_listmle(y_pred, y_true):  # noqa: ANN001, ANN201
    random_indices = torch.randperm(y_pred.shape[-1])
    y_pred_shuffled, y_true_shuffled = y_pred[:, random_indices], y_true[:, random_indices]
    _, indices = y_true_shuffled.sort(descending=True, dim=-1)
    preds_sorted = torch.gather(y_pred_shuffled, dim=1, index=indices)
    max_pred, _ = preds_sorted.max(dim=1, keepdim=True)
    diff = preds_sorted - max_pred
    cumsums = torch.cumsum(diff.exp().flip(dims=[1]), dim=1).flip(dims=[1])
    observation_loss = torch.log(cumsums + EPS) - diff
    return torch.mean(torch.sum(observation_loss, dim=1))


def allrank_ranknet(y_pred, y_true):  # noqa: ANN001, ANN201
    n = y_pred.shape[1]
    pairs = torch.triu_indices(n, n, offset=1)  # allRank: itertools.product of the document indices
    pairs = torch.cat([pairs, pairs.flip(0)], dim=1)
    pred_diffs = y_pred[:, pairs[0]] - y_pred[:, pairs[1]]
    true_diffs = y_true[:, pairs[0]] - y_true[:, pairs[1]]
    the_mask = (true_diffs > 0) & ~torch.isinf(true_diffs)
    return torch.nn.BCEWithLogitsLoss()(pred_diffs[the_mask], (true_diffs[the_mask] > 0).float())


def allrank_lambda_loss(y_pred, y_true, sigma=1.0, mu=10.0):  # noqa: ANN001, ANN201
    n = y_pred.shape[1]
    y_pred_sorted, indices_pred = y_pred.sort(descending=True, dim=-1)
    y_true_sorted, _ = y_true.sort(descending=True, dim=-1)
    true_sorted_by_preds = torch.gather(y_true, dim=1, index=indices_pred)
    true_diffs = true_sorted_by_preds[:, :, None] - true_sorted_by_preds[:, None, :]
    padded_pairs_mask = torch.isfinite(true_diffs) & (true_diffs > 0)
    pos_idxs = torch.arange(1, n + 1, device=y_pred.device)
    D = torch.log2(1.0 + pos_idxs.float())[None, :]
    max_dcgs = torch.sum((torch.pow(2, y_true_sorted) - 1) / D, dim=-1).clamp(min=EPS)
    G = (torch.pow(2, true_sorted_by_preds) - 1) / max_dcgs[:, None]
    delta_idxs = torch.abs(pos_idxs[:, None] - pos_idxs[None, :])
    deltas = torch.abs(torch.pow(torch.abs(D[0, delta_idxs - 1]), -1.0) - torch.pow(torch.abs(D[0, delta_idxs]), -1.0))
    deltas.diagonal().zero_()
    loss2 = deltas[None] * torch.abs(G[:, :, None] - G[:, None, :])
    lambdarank = torch.abs(1.0 / D[:, :, None] - 1.0 / D[:, None, :]) * torch.abs(G[:, :, None] - G[:, None, :])
    weights = mu * loss2 + lambdarank
    scores_diffs = (y_pred_sorted[:, :, None] - y_pred_sorted[:, None, :]).clamp(min=-1e8, max=1e8)
    weighted_probas = (torch.sigmoid(sigma * scores_diffs).clamp(min=EPS) ** weights).clamp(min=EPS)
    losses = torch.log2(weighted_probas)
    return -torch.sum(losses[padded_pairs_mask])


def allrank_approx_ndcg(y_pred, y_true, alpha=1.0):  # noqa: ANN001, ANN201
    n = y_pred.shape[1]
    y_pred_sorted, indices_pred = y_pred.sort(descending=True, dim=-1)
    y_true_sorted, _ = y_true.sort(descending=True, dim=-1)
    true_sorted_by_preds = torch.gather(y_true, dim=1, index=indices_pred)
    true_diffs = true_sorted_by_preds[:, :, None] - true_sorted_by_preds[:, None, :]
    padded_pairs_mask = torch.isfinite(true_diffs)
    padded_pairs_mask.diagonal(dim1=-2, dim2=-1).zero_()
    D = torch.log2(1.0 + torch.arange(1, n + 1, device=y_pred.device).float())[None, :]
    max_dcgs = torch.sum((torch.pow(2, y_true_sorted) - 1) / D, dim=-1).clamp(min=EPS)
    G = (torch.pow(2, true_sorted_by_preds) - 1) / max_dcgs[:, None]
    scores_diffs = y_pred_sorted[:, :, None] - y_pred_sorted[:, None, :]
    scores_diffs = scores_diffs.masked_fill(~padded_pairs_mask, 0.0)
    approx_pos = 1.0 + torch.sum(
        padded_pairs_mask.float() * torch.sigmoid(-alpha * scores_diffs).clamp(min=EPS), dim=-1
    )
    approx_ndcg = torch.sum(G / torch.log2(1.0 + approx_pos), dim=-1)
    return -torch.mean(approx_ndcg)


def allrank_neural_ndcg(y_pred, y_true, temperature=1.0):  # noqa: ANN001, ANN201
    n = y_pred.shape[1]
    s = y_pred.unsqueeze(-1)
    A_s = torch.abs(s - s.permute(0, 2, 1))
    B = torch.matmul(A_s, torch.ones(n, 1, device=y_pred.device))
    scaling = n + 1 - 2 * (torch.arange(n, device=y_pred.device) + 1).float()
    C = torch.matmul(s, scaling.unsqueeze(0))
    P_max = (C - B).permute(0, 2, 1)
    P_hat = torch.softmax(P_max / temperature, dim=-1)
    for _ in range(50):  # sinkhorn_scaling(tol=1e-6, max_iter=50)
        P_hat = P_hat / P_hat.sum(dim=1, keepdim=True).clamp(min=EPS)
        P_hat = P_hat / P_hat.sum(dim=2, keepdim=True).clamp(min=EPS)
        if (torch.abs(P_hat.sum(dim=1) - 1.0) < 1e-6).all() and (torch.abs(P_hat.sum(dim=2) - 1.0) < 1e-6).all():
            break
    ground_truth = torch.matmul(P_hat, (torch.pow(2, y_true) - 1).unsqueeze(-1)).squeeze(-1)
    discounts = 1.0 / torch.log2(torch.arange(n, device=y_pred.device).float() + 2.0)
    dcg = (ground_truth * discounts).sum(-1)
    idcg = ((torch.pow(2, y_true.sort(descending=True, dim=-1).values) - 1) * discounts).sum(-1)
    return -(dcg / idcg.clamp(min=EPS)).mean()


# ------------------------------------------------------------------------------------------ cases
def _ours(name: str):  # noqa: ANN202
    from torch_rankeval import losses

    opts = {"validate_args": False}
    return {
        "listnet": lambda p, y: losses.listnet(p, y, gain="linear", **opts),
        "listmle": lambda p, y: losses.listmle(p, y, **opts),
        "ranknet": lambda p, y: losses.ranknet(p, y, **opts),
        "lambda_loss": lambda p, y: losses.lambda_loss(p, y, **opts),
        "lambda_loss@10": lambda p, y: losses.lambda_loss(p, y, 10, **opts),
        "approx_ndcg": lambda p, y: losses.approx_ndcg(p, y, **opts),
        "neural_ndcg": lambda p, y: losses.neural_ndcg(p, y, **opts),
    }[name]


THEIRS = {
    "listnet": allrank_listnet,
    "listmle": allrank_listmle,
    "ranknet": allrank_ranknet,
    "lambda_loss": allrank_lambda_loss,
    "approx_ndcg": allrank_approx_ndcg,
    "neural_ndcg": allrank_neural_ndcg,
}
# allRank's neuralNDCG keeps ~100 (lists, L, L) tensors of its Sinkhorn steps for the backward pass:
# about 28 GB at 64 x 1000 in float32, more than the benchmark machine has
SKIP = {("neural_ndcg", "64x1000")}
NAMES = ["listnet", "listmle", "ranknet", "lambda_loss", "lambda_loss@10", "approx_ndcg", "neural_ndcg"]


def run_case(impl: str, name: str, shape: tuple[int, int], repeats: int, device: str) -> dict[str, float]:
    """One case in this process: median loss + backward seconds and the peak memory it added."""
    torch.set_num_threads(1)
    fn = _ours(name) if impl == "ours" else THEIRS[name]
    g = torch.Generator().manual_seed(0)
    tiny = torch.randn(2, 8, generator=g, device="cpu").to(device).requires_grad_(True)
    fn(tiny, torch.randint(0, 5, (2, 8), generator=g).float().to(device)).backward()  # warm-up, imports
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    preds = torch.randn(*shape, generator=g).to(device).requires_grad_(True)
    target = torch.randint(0, 5, shape, generator=g).float().to(device)
    times = []
    for _ in range(repeats + 1):
        preds.grad = None
        start = time.perf_counter()
        fn(preds, target).backward()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    if device == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024  # KiB on Linux
    return {"seconds": statistics.median(times[1:]), "peak_mb": peak_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="64x100,64x1000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--names", default=",".join(NAMES))
    parser.add_argument(
        "--malloc-threshold",
        type=int,
        default=131072,
        help="glibc mmap threshold for the cases (0: glibc's dynamic default, faster for many chunk allocations)",
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)  # impl:name:shape, run in this process
    args = parser.parse_args()
    if args.case:
        impl, name, shape = args.case.split(":")
        n, length = map(int, shape.split("x"))
        print(json.dumps(run_case(impl, name, (n, length), args.repeats, args.device)))
        return
    print(f"torch {torch.__version__}, {args.device}, 1 thread, median of {args.repeats} (loss + backward)")
    print("| loss | batch | ours: time | allRank: time | ours: peak MB | allRank: peak MB |")
    print("|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        for name in args.names.split(","):
            row = {}
            for impl in ("ours", "allrank"):
                if impl == "allrank" and (name not in THEIRS or (name, shape) in SKIP):
                    row[impl] = None
                    continue
                cmd = [sys.executable, __file__, "--case", f"{impl}:{name}:{shape}", "--repeats", str(args.repeats)]
                cmd += ["--device", args.device]
                # a fixed mmap threshold: freed large blocks go back to the system, so the resident
                # peak is the live memory, not glibc's heap grown by blocks it keeps for reuse
                env = dict(os.environ)
                if args.malloc_threshold:
                    env["MALLOC_MMAP_THRESHOLD_"] = str(args.malloc_threshold)
                done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
                row[impl] = json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-200:]}
            cells = []
            for key, fmt in (("seconds", "{:.1f} ms"), ("peak_mb", "{:.0f}")):
                for impl in ("ours", "allrank"):
                    r = row[impl]
                    if r is None:
                        cells.append("-")
                    elif "error" in r:
                        cells.append("failed")
                    else:
                        cells.append(fmt.format(r[key] * (1000 if key == "seconds" else 1)))
            print(
                f"| {name} | {shape.replace('x', ' x ')} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
