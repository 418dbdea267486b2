"""Train a small PyTorch model across simulated clients with secure aggregation, and measure it
on held-out data.

A small MLP (random initialisation) learns a task held by ``--clients`` clients (non-IID: each
has its own input shift and size; a shared linear teacher labels the inputs). Each client keeps a
quarter of its rows out of training; the accuracy printed each round is on those held-out rows of
every client. Every round each client runs a few local SGD steps in PyTorch; the server never
sees an update: :func:`protocols.secure_weighted_average` averages them (weights = example
counts, public L2 clip, the secure sum in memory) and the average update is applied. Optionally
the geometric median (RFA, same public clip) replaces the mean.

    pip install "secagg-dp[torch]"    # torch==2.13.0 (CPU build)
    python examples/torch_finetune.py --clients 8 --rounds 5
    python examples/torch_finetune.py --aggregation geometric_median
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from protocols.aggregation import AverageSettings, geometric_median, secure_weighted_average
from protocols.integrations.torch import flatten_state, state_update, unflatten_state

FEATURES, HIDDEN, CLASSES = 16, 32, 4


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


@dataclass
class ClientData:
    x: torch.Tensor
    y: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def make_clients(count: int, seed: int) -> list[ClientData]:
    """A shared teacher labels shifted inputs; client i's shift and size are its own."""
    generator = torch.Generator().manual_seed(seed)
    teacher = torch.randn(FEATURES, CLASSES, generator=generator)
    clients = []
    for i in range(count):
        rows = 40 + 10 * (i % 4)
        shift = 0.3 * torch.randn(FEATURES, generator=generator)
        x = torch.randn(rows, FEATURES, generator=generator) + shift
        y = (x @ teacher).argmax(dim=1)
        train = rows - rows // 4  # a quarter of each client's rows is held out
        clients.append(ClientData(x[:train], y[:train], x[train:], y[train:]))
    return clients


def local_steps(model: nn.Module, data: ClientData, steps: int, lr: float) -> None:
    optimiser = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(steps):
        optimiser.zero_grad()
        loss_fn(model(data.x), data.y).backward()
        optimiser.step()


def accuracy(model: nn.Module, clients: list[ClientData]) -> float:
    """Accuracy on the clients' held-out rows (never trained on)."""
    with torch.no_grad():
        hits = sum(int((model(c.x_test).argmax(dim=1) == c.y_test).sum()) for c in clients)
    return hits / sum(len(c.y_test) for c in clients)


def finetune(
    *,
    clients: int = 8,
    rounds: int = 5,
    steps: int = 5,
    lr: float = 0.1,
    clip: float = 5.0,
    aggregation: str = "mean",
    seed: int = 0,
    secure: bool = True,
) -> list[float]:
    """Run the training; return the held-out accuracy before and after each round."""
    data = make_clients(clients, seed)
    model = make_model(seed)
    history = [accuracy(model, data)]
    for server_round in range(rounds):
        start = {k: v.detach().clone() for k, v in model.state_dict().items()}
        updates, weights = [], []
        for client in data:
            local = make_model(seed)
            local.load_state_dict(start)
            local_steps(local, client, steps, lr)
            updates.append(state_update(start, local.state_dict()))
            weights.append(float(len(client.y)))
        matrix = np.stack(updates)
        round_seed = None if seed is None else seed * 1000 + server_round
        if aggregation == "mean":
            update = secure_weighted_average(
                matrix, weights, clip=clip, weight_cap=max(weights), seed=round_seed, secure=secure
            ).average
        else:
            update = geometric_median(
                matrix,
                weights,
                weight_cap=max(weights),
                settings=AverageSettings(bits=64, clip=clip),
                seed=round_seed,
                secure=secure,
            ).median
        flat, layout = flatten_state(start)
        model.load_state_dict(unflatten_state(flat + update, layout, like=start))
        history.append(accuracy(model, data))
        print(f"round {server_round + 1}: held-out accuracy {history[-1]:.3f}", flush=True)
    return history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--aggregation", choices=("mean", "geometric_median"), default="mean")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    history = finetune(
        clients=args.clients, rounds=args.rounds, aggregation=args.aggregation, seed=args.seed
    )
    print(f"held-out accuracy {history[0]:.3f} -> {history[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
