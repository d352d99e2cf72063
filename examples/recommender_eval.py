"""Train a matrix-factorisation recommender with Lightning, validated every epoch on the full catalogue.

Run (from the repository root): ``python examples/recommender_eval.py`` (``--help`` for the settings).
Needs the ``lightning`` extra: ``pip install -e ".[lightning]"`` (the script says so and exits when
Lightning is missing).

The data is a seeded synthetic implicit-feedback set, generated here (nothing to download): each
user and item has a latent factor vector, items have a Zipf-like popularity, and every user
interacts with 20-60 items drawn without replacement with probability ``softmax(a u . v / sqrt(f) +
popularity)``. Per user, ``--held-out`` random interactions are the validation targets; the rest are
the training interactions.

The model scores a user-item pair by the dot product of their embeddings and is trained with the
BPR loss (each training interaction against one uniformly drawn item). Validation is the full
catalogue, as a recommender is used: for every user the model scores **every** item, the items the
user interacted with in training are excluded (never ranked, never counted), and the held-out items
are the targets, given as a sparse ``(users, items)`` tensor built from id lists. ``RankingMetrics``
reports nDCG@20, Recall@20 and MAP@20 and ``ItemExposure`` the catalogue coverage, Gini index,
entropy and mean popularity of the top-20 lists; both are logged each epoch (``val/ndcg@20``, ...).
Before training the script prints what random scores get, evaluated the same way, and what
recommending the most popular unseen items gets; at the end, where the trained model got.

Beyond accuracy: the trained scores are then re-ranked two ways, a *popularity-biased* model (the
standardised scores plus a quarter of the standardised log-popularity) and a *more diverse* one
(maximal marginal relevance over each user's top 100: greedily the item maximising ``0.2 *
score - 0.8 * its largest cosine similarity to the items already chosen``, on the model's item
embeddings). Their nDCG@20 is close, while ``IntraListDiversity`` (cosine of the item embeddings)
and ``Novelty`` (self-information of the training popularity) tell them apart.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

try:
    import lightning.pytorch as pl
except ImportError:  # the one optional dependency of this example: say which extra brings it
    raise SystemExit(
        'examples/recommender_eval.py trains with Lightning and needs the lightning extra: pip install -e ".[lightning]"'
    ) from None
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from torch_rankeval import IntraListDiversity, ItemExposure, Novelty, RankingMetrics
from torch_rankeval.ranking.sparse import sparse_from_ids

METRICS = ("ndcg@20", "recall@20", "map@20")
K = 20
PAD = -1

DEFAULTS = {
    "users": 600,
    "items": 2000,
    "factors": 8,
    "min_interactions": 20,
    "max_interactions": 60,
    "held_out": 5,
    "affinity": 3.0,
    "popularity_skew": 1.0,
    "dim": 32,
    "epochs": 8,
    "batch_size": 512,
    "eval_batch_size": 200,
    "lr": 0.02,
    "weight_decay": 1e-4,
    "seed": 0,
}


# ---------------------------------------------------------------------------------------- data
@dataclass
class ImplicitFeedback:
    """A synthetic implicit-feedback set, split per user into training interactions and held-out targets.

    Attributes:
        num_items: the catalogue size.
        train_ids: ``(users, m)`` item ids each user interacted with in training, ``-1`` pads.
        held_out: ``(users, h)`` held-out item ids per user (the validation targets; never in ``train_ids``).
        popularity: ``(items,)`` float training-interaction count of every item.
    """

    num_items: int
    train_ids: Tensor
    held_out: Tensor
    popularity: Tensor

    @property
    def num_users(self) -> int:
        return self.train_ids.shape[0]

    def train_pairs(self) -> tuple[Tensor, Tensor]:
        """The training interactions as ``(user, item)`` id pairs."""
        keep = self.train_ids != PAD
        users = torch.arange(self.num_users).unsqueeze(1).expand_as(self.train_ids)
        return users[keep], self.train_ids[keep]


def make_data(
    users: int = DEFAULTS["users"],
    items: int = DEFAULTS["items"],
    *,
    factors: int = DEFAULTS["factors"],
    min_interactions: int = DEFAULTS["min_interactions"],
    max_interactions: int = DEFAULTS["max_interactions"],
    held_out: int = DEFAULTS["held_out"],
    affinity: float = DEFAULTS["affinity"],
    popularity_skew: float = DEFAULTS["popularity_skew"],
    seed: int = DEFAULTS["seed"],
) -> ImplicitFeedback:
    """Draw the data set (deterministic in ``seed``).

    User and item factors are standard normal ``(factors,)`` vectors; item ``i`` of a random
    permutation gets the log-popularity ``-popularity_skew * log(1 + i)`` (Zipf). A user's
    interactions are ``n ~ U{min_interactions, max_interactions}`` distinct items drawn without
    replacement with probabilities ``softmax(affinity * u . v / sqrt(factors) + log-popularity)``; ``held_out``
    of them, chosen uniformly, are the targets.
    """
    if not 0 < held_out < min_interactions <= max_interactions <= items:
        raise ValueError("need 0 < held_out < min_interactions <= max_interactions <= items")
    g = torch.Generator().manual_seed(seed)
    user_factors = torch.randn(users, factors, generator=g)
    item_factors = torch.randn(items, factors, generator=g)
    log_popularity = -popularity_skew * torch.log1p(torch.randperm(items, generator=g).float())
    logits = affinity * (user_factors @ item_factors.T) / math.sqrt(factors) + log_popularity
    drawn = torch.multinomial(torch.softmax(logits, dim=1), max_interactions, replacement=False, generator=g)
    counts = torch.randint(min_interactions, max_interactions + 1, (users, 1), generator=g)
    valid = torch.arange(max_interactions) < counts
    # Shuffle each user's valid interactions to the front in random order: the first `held_out` are
    # the targets (multinomial's draw order favours likely items; a random split does not).
    order = torch.where(valid, torch.rand(users, max_interactions, generator=g), 2.0).argsort(dim=1)
    shuffled = drawn.gather(1, order)
    train_valid = valid.gather(1, order)[:, held_out:]
    train_ids = torch.where(train_valid, shuffled[:, held_out:], PAD)
    popularity = torch.bincount(train_ids[train_valid], minlength=items).float()
    return ImplicitFeedback(items, train_ids, shuffled[:, :held_out].contiguous(), popularity)


def eval_loader(data: ImplicitFeedback, batch_size: int) -> DataLoader:
    """Batches of ``(users, held_out ids, training ids)`` for full-catalogue evaluation."""
    users = torch.arange(data.num_users)
    return DataLoader(TensorDataset(users, data.held_out, data.train_ids), batch_size=batch_size)


# ---------------------------------------------------------------------------------------- evaluation
def build_metrics(data: ImplicitFeedback) -> tuple[RankingMetrics, ItemExposure]:
    """nDCG/Recall/MAP@20 and the exposure of the top-20 lists (mean popularity: training counts)."""
    return RankingMetrics(metrics=METRICS), ItemExposure(data.num_items, k=K, popularity=data.popularity)


def update_metrics(
    ranking: RankingMetrics, exposure: ItemExposure, scores: Tensor, held_out: Tensor, train_ids: Tensor
) -> None:
    """Add one batch of users: ``scores`` is ``(users, num_items)``, every item of the catalogue."""
    num_items = scores.shape[1]
    target = sparse_from_ids(held_out, num_items=num_items)  # sparse (users, items), grade 1
    seen = sparse_from_ids(train_ids, num_items=num_items, grades=train_ids != PAD)  # sparse bool
    # Excluded items are never ranked and never counted; with every metric cut off at 20, only the
    # top 20 of each row are ranked (no sort of the row) and no dense copy of the target is made.
    ranking.update(scores, target, exclude=seen)
    exposure.update(scores, exclude=seen)


def compute_metrics(ranking: RankingMetrics, exposure: ItemExposure) -> dict[str, Tensor]:
    return {**ranking.compute(), **exposure.compute()}


def evaluate_scores(data: ImplicitFeedback, score_fn: Callable[[Tensor], Tensor], batch_size: int) -> dict[str, float]:
    """The validation metrics of ``score_fn(users) -> (users, num_items)`` scores, outside Lightning."""
    ranking, exposure = build_metrics(data)
    for users, held_out, train_ids in eval_loader(data, batch_size):
        update_metrics(ranking, exposure, score_fn(users), held_out, train_ids)
    return {key: value.item() for key, value in compute_metrics(ranking, exposure).items()}


# ---------------------------------------------------------------------------------------- model
class MatrixFactorization(pl.LightningModule):
    """Users and items as ``dim``-vectors; the score of a pair is their dot product. BPR loss.

    Each validation epoch ranks the whole catalogue for every validation user and logs
    ``val/ndcg@20``, ``val/recall@20``, ``val/map@20``, ``val/coverage@20``, ``val/gini@20``,
    ``val/entropy@20`` and ``val/popularity@20``.
    """

    def __init__(
        self, data: ImplicitFeedback, dim: int = DEFAULTS["dim"], lr: float = DEFAULTS["lr"],
        weight_decay: float = DEFAULTS["weight_decay"],
    ) -> None:  # fmt: skip
        super().__init__()
        self.num_items, self.lr, self.weight_decay = data.num_items, lr, weight_decay
        self.user = nn.Embedding(data.num_users, dim)
        self.item = nn.Embedding(data.num_items, dim)
        nn.init.normal_(self.user.weight, std=0.1)
        nn.init.normal_(self.item.weight, std=0.1)
        # Module attributes: Lightning moves them with the model (their states are not in the state_dict).
        self.ranking, self.exposure = build_metrics(data)
        self.history: list[dict[str, float]] = []

    def forward(self, users: Tensor) -> Tensor:
        """``(users, num_items)`` scores over the whole catalogue."""
        return self.user(users) @ self.item.weight.T

    def training_step(self, batch: list[Tensor], batch_idx: int) -> Tensor:
        users, positives = batch
        negatives = torch.randint(0, self.num_items, positives.shape, device=positives.device)
        u = self.user(users)
        margin = (u * self.item(positives)).sum(-1) - (u * self.item(negatives)).sum(-1)
        loss = -nn.functional.logsigmoid(margin).mean()
        self.log("train/bpr", loss, prog_bar=True, on_step=False, on_epoch=True, batch_size=users.shape[0])
        return loss

    def on_validation_epoch_start(self) -> None:
        self.ranking.reset()
        self.exposure.reset()

    def validation_step(self, batch: list[Tensor], batch_idx: int) -> None:
        users, held_out, train_ids = batch
        update_metrics(self.ranking, self.exposure, self(users), held_out, train_ids)

    def on_validation_epoch_end(self) -> None:
        values = compute_metrics(self.ranking, self.exposure)
        self.ranking.reset()
        self.exposure.reset()
        self.log_dict({f"val/{key}": value for key, value in values.items()}, prog_bar=True)
        if not self.trainer.sanity_checking:
            self.history.append({key: value.item() for key, value in values.items()})

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)


# ---------------------------------------------------------------------------------------- beyond accuracy
def seen_mask(data: ImplicitFeedback) -> Tensor:
    """``(users, items)`` bool: the training interactions."""
    seen = torch.zeros(data.num_users, data.num_items, dtype=torch.bool)
    users = torch.arange(data.num_users).unsqueeze(1).expand_as(data.train_ids)
    keep = data.train_ids != PAD
    seen[users[keep], data.train_ids[keep]] = True
    return seen


def popularity_biased(scores: Tensor, popularity: Tensor, weight: float = 0.25) -> Tensor:
    """Standardised scores plus ``weight`` times the standardised ``log(1 + popularity)``."""
    z = (scores - scores.mean(1, keepdim=True)) / scores.std(1, keepdim=True)
    log_pop = torch.log1p(popularity)
    return z + weight * (log_pop - log_pop.mean()) / log_pop.std()


def diversified(
    scores: Tensor, embeddings: Tensor, seen: Tensor, *, relevance: float = 0.2, pool: int = 100, k: int = K
) -> Tensor:
    """Maximal marginal relevance: per user, ``k`` items chosen greedily from the top ``pool`` unseen
    ones, each maximising ``relevance * z-score - (1 - relevance) * (largest cosine similarity to
    the items chosen so far)``; they get the scores ``k, k - 1, ..., 1``, every other item its
    z-score minus 1,000 (below them, order kept)."""
    z = (scores - scores.mean(1, keepdim=True)) / scores.std(1, keepdim=True)
    candidates = z.masked_fill(seen, -math.inf).topk(pool, dim=1).indices
    rel = z.gather(1, candidates)
    unit = nn.functional.normalize(embeddings, dim=1)[candidates]  # (users, pool, dim)
    sim = unit @ unit.transpose(1, 2)
    rows = torch.arange(scores.shape[0])
    chosen = torch.zeros_like(rel, dtype=torch.bool)
    closest = torch.zeros_like(rel)
    out = z - 1e3
    for step in range(k):
        value = (relevance * rel - (1 - relevance) * closest).masked_fill(chosen, -math.inf)
        j = value.argmax(1)
        chosen[rows, j] = True
        closest = torch.maximum(closest, sim[rows, j].clamp(min=0))
        out[rows, candidates[rows, j]] = float(k - step)
    return out


def beyond_accuracy(data: ImplicitFeedback, model: MatrixFactorization) -> dict[str, dict[str, float]]:
    """nDCG@20, intra-list diversity@20 and novelty@20 of the popularity-biased and the diverse
    re-rankings of the trained model's scores (every user, the full catalogue, seen items excluded)."""
    with torch.no_grad():
        scores = model(torch.arange(data.num_users))
        embeddings = model.item.weight.detach().clone()
    seen = seen_mask(data)
    target = sparse_from_ids(data.held_out, num_items=data.num_items)
    out = {}
    for name, s in (
        ("popularity-biased", popularity_biased(scores, data.popularity)),
        ("diverse", diversified(scores, embeddings, seen)),
    ):
        ranking = RankingMetrics(metrics=("ndcg@20",))
        diversity = IntraListDiversity(data.num_items, K, embeddings=embeddings)
        novelty = Novelty(data.num_items, K, data.popularity)
        ranking.update(s, target, exclude=seen)
        diversity.update(s, exclude=seen)
        novelty.update(s, exclude=seen)
        values = {**ranking.compute(), **diversity.compute(), **novelty.compute()}
        out[name] = {key: value.item() for key, value in values.items()}
    return out


# ---------------------------------------------------------------------------------------- main
@dataclass
class Result:
    """What :func:`main` returns: the last epoch's validation metrics, every epoch's, the baselines,
    the trained model, the data, and the beyond-accuracy comparison of :func:`beyond_accuracy`."""

    metrics: dict[str, float]
    history: list[dict[str, float]]
    random: dict[str, float]
    most_popular: dict[str, float]
    model: MatrixFactorization
    data: ImplicitFeedback
    beyond: dict[str, dict[str, float]] = field(default_factory=dict)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--users", type=int, default=DEFAULTS["users"])
    add("--items", type=int, default=DEFAULTS["items"], help="catalogue size")
    add("--factors", type=int, default=DEFAULTS["factors"], help="latent factors of the synthetic data")
    add("--min-interactions", type=int, default=DEFAULTS["min_interactions"], help="fewest interactions per user")
    add("--max-interactions", type=int, default=DEFAULTS["max_interactions"], help="most interactions per user")
    add("--held-out", type=int, default=DEFAULTS["held_out"], help="held-out (target) interactions per user")
    add("--affinity", type=float, default=DEFAULTS["affinity"], help="weight of the user-item factor match")
    add("--popularity-skew", type=float, default=DEFAULTS["popularity_skew"], help="Zipf exponent of item popularity")
    add("--dim", type=int, default=DEFAULTS["dim"], help="embedding size of the model")
    add("--epochs", type=int, default=DEFAULTS["epochs"])
    add("--batch-size", type=int, default=DEFAULTS["batch_size"], help="training interactions per batch")
    add("--eval-batch-size", type=int, default=DEFAULTS["eval_batch_size"], help="users per validation batch")
    add("--lr", type=float, default=DEFAULTS["lr"], help="Adam learning rate")
    add("--weight-decay", type=float, default=DEFAULTS["weight_decay"], help="Adam weight decay")
    add("--seed", type=int, default=DEFAULTS["seed"], help="seed of the data, the initial weights and the sampling")
    add("--accelerator", default="cpu", help="Lightning accelerator (cpu, gpu, auto)")
    add("--progress-bar", action="store_true", help="show Lightning's progress bar")
    return parser.parse_args(argv)


def _format(values: dict[str, float]) -> str:
    return "  ".join(f"{key}={value:.4f}" for key, value in values.items())


def main(argv: list[str] | None = None) -> Result:
    """Parse ``argv`` (default: the command line), train, and return the validation results."""
    args = parse_args(argv)
    data = make_data(
        args.users, args.items, factors=args.factors, min_interactions=args.min_interactions,
        max_interactions=args.max_interactions, held_out=args.held_out, affinity=args.affinity, popularity_skew=args.popularity_skew,
        seed=args.seed,
    )  # fmt: skip
    n_train = int((data.train_ids != PAD).sum())
    print(f"{data.num_users} users x {data.num_items} items: {n_train} training interactions, "
          f"{data.held_out.numel()} held out", flush=True)  # fmt: skip

    g = torch.Generator().manual_seed(args.seed + 1)
    random = evaluate_scores(
        data, lambda users: torch.rand(len(users), data.num_items, generator=g), args.eval_batch_size
    )
    most_popular = evaluate_scores(
        data, lambda users: data.popularity.expand(len(users), -1), args.eval_batch_size
    )  # ties among equally popular items: averaged exactly
    print(f"random scores: {_format(random)}", flush=True)
    print(f"most popular:  {_format(most_popular)}", flush=True)

    pl.seed_everything(args.seed, verbose=False)
    model = MatrixFactorization(data, dim=args.dim, lr=args.lr, weight_decay=args.weight_decay)
    train = DataLoader(TensorDataset(*data.train_pairs()), batch_size=args.batch_size, shuffle=True)
    trainer = pl.Trainer(
        accelerator=args.accelerator, devices=1, max_epochs=args.epochs, logger=False, enable_checkpointing=False,
        enable_progress_bar=args.progress_bar, enable_model_summary=False, num_sanity_val_steps=0,
    )  # fmt: skip
    trainer.fit(model, train, eval_loader(data, args.eval_batch_size))
    for epoch, values in enumerate(model.history):
        print(f"epoch {epoch}: {_format(values)}", flush=True)
    metrics = model.history[-1]
    for key in ("ndcg@20", "recall@20", "map@20", "coverage@20"):
        print(f"  {key}: random {random[key]:.4f}, most popular {most_popular[key]:.4f} -> trained {metrics[key]:.4f}")
    beyond = beyond_accuracy(data, model)
    print("beyond accuracy (re-rankings of the trained scores):")
    for name, values in beyond.items():
        print(f"  {name:>17}: {_format(values)}")
    return Result(metrics, model.history, random, most_popular, model, data, beyond)


if __name__ == "__main__":
    # The model is tiny: one intra-op thread is faster than several fighting over the cores.
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    main()
