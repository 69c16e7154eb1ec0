"""Small competition folders in MLE-bench's layout (prepared/public, prepared/private) and the inputs every metric is checked on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def competition(base: Path, name: str = "random-acts-of-pizza") -> Path:
    """A small MLE-bench folder (binary AUC) whose answers the tests may remove or shorten."""
    root = base / name
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    rng = np.random.default_rng(3)
    x = rng.normal(size=120)
    y = (x + rng.normal(scale=0.5, size=120) > 0).astype(int)
    ids = [f"r{i:03d}" for i in range(120)]
    pd.DataFrame({"id": ids[:80], "x": x[:80], "label": y[:80]}).to_csv(public / "train.csv", index=False)
    pd.DataFrame({"id": ids[80:], "x": x[80:]}).to_csv(public / "test.csv", index=False)
    pd.DataFrame({"id": ids[80:], "label": 0.5}).to_csv(public / "sample_submission.csv", index=False)
    pd.DataFrame({"id": ids[80:], "label": y[80:]}).to_csv(private / "test.csv", index=False)
    (root / "verifyless.yaml").write_text("metric: auc\n")
    return root


def metric_inputs() -> tuple:
    """Small inputs every metric is checked on: ids, binary truth and probabilities, three-class labels and
    guesses, and a regression's values and estimates (shared by task/tabular/test_prepare.py and test_grading.py)."""
    return (
        [str(i) for i in range(8)],
        np.array([0, 1, 1, 0, 1, 0, 1, 1]),
        np.array([0.2, 0.7, 0.6, 0.4, 0.9, 0.1, 0.3, 0.8]),
        np.array([0, 1, 2, 2, 1, 0, 1, 2]),
        np.array([0, 1, 2, 1, 1, 0, 2, 2]),
        np.array([1.0, 2, 3, 4, 5, 6, 7, 8]),
        np.array([1.5, 2, 2.5, 4, 6, 6, 7, 9]),
    )


AUTHORS = {
    "EAP": "raven dark chamber whisper tomb silent dream ghastly".split(),
    "HPL": "ancient eldritch cyclopean horror abyss unnamable cosmic sea".split(),
    "MWS": "heart tender mountain lake sorrow friend creature life".split(),
}


COMMON = "the a of and in was upon that it i".split()


def sentences(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    authors = [str(a) for a in rng.choice(sorted(AUTHORS), size=n)]
    texts = []
    for author in authors:
        words = [str(w) for w in rng.choice(AUTHORS[author] + COMMON * 2, size=int(rng.integers(6, 14)))]
        texts.append(" ".join(words).capitalize() + ".")
    return texts, authors


def spooky_text_folder(base: Path, rows: int = 150, tests: int = 60) -> Path:
    """spooky-author-identification in MLE-bench's layout: id, text and author, nothing else."""
    root = base / "spooky-author-identification"
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    texts, authors = sentences(rows + tests, seed=7)
    ids = [f"id{i:05d}" for i in range(rows + tests)]
    pd.DataFrame({"id": ids[:rows], "text": texts[:rows], "author": authors[:rows]}).to_csv(
        public / "train.csv", index=False
    )
    pd.DataFrame({"id": ids[rows:], "text": texts[rows:]}).to_csv(public / "test.csv", index=False)
    classes = sorted(AUTHORS)
    pd.DataFrame({"id": ids[rows:], **{c: round(1 / 3, 6) for c in classes}}).to_csv(
        public / "sample_submission.csv", index=False
    )
    truth = np.array(authors[rows:])
    pd.DataFrame({"id": ids[rows:], **{c: (truth == c).astype(int) for c in classes}}).to_csv(
        private / "test.csv", index=False
    )
    (public / "description.md").write_text("# Spooky Author Identification\n\nWho wrote each sentence?\n")
    return root


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """Each test's own competition split cache (``VERIFYLESS_CACHE_DIR``); autouse where a module imports it."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("VERIFYLESS_CACHE_DIR", str(folder))
    return folder


def spooky_folder(base: Path) -> Path:
    """A tiny folder in MLE-bench's layout for spooky-author-identification (per-class log-loss submission)."""
    root = base / "spooky-author-identification"
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    rng = np.random.default_rng(1)
    authors = rng.choice(["EAP", "HPL", "MWS"], size=90)
    train = pd.DataFrame(
        {"id": [f"id{i:03d}" for i in range(60)], "length": rng.normal(size=60), "author": authors[:60]}
    )
    test_ids = [f"id{i:03d}" for i in range(60, 90)]
    train.to_csv(public / "train.csv", index=False)
    pd.DataFrame({"id": test_ids, "length": rng.normal(size=30)}).to_csv(public / "test.csv", index=False)
    pd.DataFrame({"id": test_ids, "EAP": 0.4, "HPL": 0.3, "MWS": 0.3}).to_csv(
        public / "sample_submission.csv", index=False
    )
    answers = pd.DataFrame({"id": test_ids, **{a: (authors[60:] == a).astype(int) for a in ("EAP", "HPL", "MWS")}})
    answers.to_csv(private / "test.csv", index=False)
    (public / "description.md").write_text("# Spooky Author Identification\n")
    return root
