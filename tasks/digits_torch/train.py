"""Handwritten digits with a small PyTorch network (CPU, one thread).

Run: python train.py --data <public dir> --out <output dir>
Writes val_probabilities.csv and test_probabilities.csv: ten class
probabilities per input row, in order. Only the region between the
EVOLVE-BLOCK markers may change; it must define fit(x, y) returning a function
that maps an (n, 64) input array to an (n, 10) array of class probabilities.
"""

import argparse
import os
from pathlib import Path

import numpy as np

# EVOLVE-BLOCK-START
import math

import torch
import torch.nn.functional as F
from torch import nn

DEVICE = torch.device("cpu")  # main() picks CUDA when the task is given a GPU
EPOCHS = 15
BATCH = 64
DROPOUT = 0.0


def prepare(x):
    """Network inputs from raw pixel intensities (integers 0-16), shape (n, 64)."""
    return x


def make_network():
    """Maps a (n, 64) float tensor to 10 class scores."""
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def make_optimizer(params):
    """The optimiser for the network's parameters."""
    return torch.optim.SGD(params, lr=0.01)


def learning_rate_factor(epoch):
    """Multiplier of the base learning rate during `epoch` (0-based)."""
    return 1.0


def random_shift(images, generator):
    """Shift each (8, 8) image by -1, 0 or +1 pixels per axis, zero-filled."""
    padded = F.pad(images, (1, 1, 1, 1))
    offsets = torch.randint(0, 3, (len(images), 2), generator=generator).tolist()
    return torch.stack([padded[i, dy:dy + 8, dx:dx + 8] for i, (dy, dx) in enumerate(offsets)])


def augment(images, generator):
    """Random changes to one training batch of shape (b, 8, 8)."""
    return images


def objective(logits, targets, net):
    """The loss minimised on each batch."""
    return F.cross_entropy(logits, targets)


def fit(x, y):
    """Train on (x, y); return a function mapping inputs to (n, 10) class probabilities."""
    inputs = torch.tensor(prepare(x), dtype=torch.float32)
    targets = torch.tensor(y, dtype=torch.long)
    net = make_network().to(DEVICE)
    optimizer = make_optimizer(net.parameters())
    base_rates = [group["lr"] for group in optimizer.param_groups]
    generator = torch.Generator().manual_seed(0)
    for epoch in range(EPOCHS):
        for group, rate in zip(optimizer.param_groups, base_rates):
            group["lr"] = rate * learning_rate_factor(epoch)
        net.train()
        order = torch.randperm(len(inputs), generator=generator)
        for start in range(0, len(inputs), BATCH):
            batch = order[start:start + BATCH]
            images = augment(inputs[batch].reshape(-1, 8, 8), generator).reshape(-1, 64).to(DEVICE)
            optimizer.zero_grad()
            objective(net(images), targets[batch].to(DEVICE), net).backward()
            optimizer.step()
    net.eval()

    def predict_proba(x_new):
        with torch.no_grad():
            logits = net(torch.tensor(prepare(x_new), dtype=torch.float32).to(DEVICE))
        return torch.softmax(logits, dim=1).cpu().numpy()

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
    x_train, y_train = train[:, :-1], train[:, -1].astype(int)
    predict_proba = fit(x_train, y_train)
    for name in ("val", "test"):
        x = np.loadtxt(data / f"{name}_inputs.csv", delimiter=",", skiprows=1, ndmin=2)
        probabilities = np.asarray(predict_proba(x), dtype=float)
        np.savetxt(out / f"{name}_probabilities.csv", probabilities, delimiter=",", fmt="%.6f")


if __name__ == "__main__":
    main()
