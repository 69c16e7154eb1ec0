"""Half-moons classification with a small PyTorch network (CPU, one thread).

Run: python train.py --data <public dir> --out <output dir>
Writes val_probabilities.csv and test_probabilities.csv: the predicted
probability of class 1 for every input row, in order. Only the region between
the EVOLVE-BLOCK markers may change; it must define fit(x, y) returning a
function that maps an input array to class-1 probabilities.
"""

import argparse
import os
from pathlib import Path

import numpy as np

# EVOLVE-BLOCK-START
import torch
from torch import nn

DEVICE = torch.device("cpu")  # main() picks CUDA when the task is given a GPU
HIDDEN = 16
DEPTH = 1
EPOCHS = 30
BATCH = 64


def prepare(x, stats):
    """Network inputs from raw columns; `stats` holds training mean and std."""
    return (x - stats["mean"]) / stats["std"]


def make_network(n_inputs):
    """A feed-forward network ending in one logit."""
    layers, size = [], n_inputs
    for _ in range(DEPTH):
        layers += [nn.Linear(size, HIDDEN), nn.Tanh()]
        size = HIDDEN
    layers.append(nn.Linear(size, 1))
    return nn.Sequential(*layers)


def make_optimizer(params):
    """The optimiser for the network's parameters."""
    return torch.optim.SGD(params, lr=0.01)


def fit(x, y):
    """Train on (x, y); return a function mapping inputs to class-1 probabilities."""
    stats = {"mean": x.mean(axis=0), "std": x.std(axis=0) + 1e-8}
    inputs = torch.tensor(prepare(x, stats), dtype=torch.float32, device=DEVICE)
    targets = torch.tensor(y, dtype=torch.float32, device=DEVICE).reshape(-1, 1)
    net = make_network(inputs.shape[1]).to(DEVICE)
    optimizer = make_optimizer(net.parameters())
    loss_fn = nn.BCEWithLogitsLoss()
    order_rng = torch.Generator().manual_seed(0)
    for _ in range(EPOCHS):
        order = torch.randperm(len(inputs), generator=order_rng).to(DEVICE)
        for start in range(0, len(inputs), BATCH):
            batch = order[start : start + BATCH]
            optimizer.zero_grad()
            loss_fn(net(inputs[batch]), targets[batch]).backward()
            optimizer.step()

    def predict_proba(x_new):
        with torch.no_grad():
            logits = net(torch.tensor(prepare(x_new, stats), dtype=torch.float32, device=DEVICE))
        return torch.sigmoid(logits).cpu().numpy().reshape(-1)

    return predict_proba
# EVOLVE-BLOCK-END


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with train.csv, val_inputs.csv, test_inputs.csv")
    parser.add_argument("--out", required=True, help="folder to write probabilities to")
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    # One thread and fixed seeds: the score must depend on the work done, not on timing.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    np.random.seed(0)
    # A verification given a GPU (task limits.gpus > 0) trains there; a CPU task never sees one.
    if "DEVICE" in globals() and torch.cuda.is_available():
        globals()["DEVICE"] = torch.device("cuda")

    # A cheaper fidelity level (task.yaml `fidelity:`) scales the passes over the data; unset: full fidelity.
    fraction = os.environ.get("VERIFYLESS_EPOCH_FRACTION")
    if fraction and isinstance(globals().get("EPOCHS"), int):
        globals()["EPOCHS"] = max(1, round(globals()["EPOCHS"] * float(fraction)))

    train = np.loadtxt(data / "train.csv", delimiter=",", skiprows=1)
    x_train, y_train = train[:, :-1], train[:, -1]
    predict_proba = fit(x_train, y_train)
    for name in ("val", "test"):
        x = np.loadtxt(data / f"{name}_inputs.csv", delimiter=",", skiprows=1)
        probabilities = np.asarray(predict_proba(x), dtype=float).reshape(-1)
        np.savetxt(out / f"{name}_probabilities.csv", probabilities, fmt="%.6f")


if __name__ == "__main__":
    main()
