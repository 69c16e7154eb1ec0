"""Regenerate this competition's prepared folders from scikit-learn's bundled diabetes data.

Written like an MLE-bench ``prepare.py``: the 442 patients are split once (``train_test_split``,
``random_state=0``) into ``prepared/public/`` and ``prepared/private/test.csv`` (the answers). The target,
disease progression one year after baseline, is positive (25-346), so the competition is scored by RMSLE.
Deterministic; run from anywhere: ``python tasks/diabetes_rmsle/make_data.py``.
"""

from pathlib import Path

import pandas as pd
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

HERE = Path(__file__).resolve().parent
DESCRIPTION = """# Diabetes progression

Predict a quantitative measure of diabetes progression one year after baseline from ten measurements
taken at baseline: age, sex, body mass index, average blood pressure and six blood serum measurements
(`s1`-`s6`), for 442 patients (the data of Efron et al., 2004, as bundled with scikit-learn, unscaled).

## Evaluation

Root mean squared logarithmic error between the predicted and the observed `progression`
(lower is better); predictions must be non-negative.

## Submission file

For each `id` in test.csv, predict `progression`:

```
id,progression
p003,150.0
```

## Data

- train.csv: the measurements and `progression`
- test.csv: the measurements only
- sample_submission.csv: a submission in the right format
"""


def prepare(public: Path, private: Path) -> None:
    data = load_diabetes(as_frame=True, scaled=False)
    frame = data.data.rename(columns=str)
    frame.insert(0, "id", [f"p{i:03d}" for i in range(len(frame))])
    frame["progression"] = data.target.astype(int)
    train, test = train_test_split(frame, test_size=0.2, random_state=0)
    public.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=["progression"]).to_csv(public / "test.csv", index=False)
    test[["id", "progression"]].to_csv(private / "test.csv", index=False)
    sample = pd.DataFrame({"id": test["id"], "progression": float(train["progression"].mean().round(1))})
    sample.to_csv(public / "sample_submission.csv", index=False)
    (public / "description.md").write_text(DESCRIPTION)


if __name__ == "__main__":
    prepare(HERE / "prepared" / "public", HERE / "prepared" / "private")
