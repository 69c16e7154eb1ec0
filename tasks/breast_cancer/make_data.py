"""Regenerate this competition's prepared folders from scikit-learn's bundled breast cancer data.

Written like an MLE-bench ``prepare.py``: the labelled rows are split once (``train_test_split``,
``random_state=0``) into ``prepared/public/`` (train.csv with labels, test.csv without, a sample
submission, description.md) and ``prepared/private/test.csv`` (the answers). Deterministic; run from
anywhere: ``python tasks/breast_cancer/make_data.py``. The committed files are its output.
"""

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

HERE = Path(__file__).resolve().parent
# The size measurements (radius, perimeter, area, ...) and the worst values separate the classes almost
# perfectly; leaving them out keeps room for a search to improve on the baseline (AUC ~0.97 vs ~0.98).
COLUMNS = ["mean texture", "mean smoothness", "mean symmetry", "mean fractal dimension"]
DESCRIPTION = """# Breast cancer diagnosis

Predict whether a breast mass is malignant from 14 measurements of its cell nuclei, computed from a
digitised image of a fine needle aspirate (the Wisconsin Diagnostic Breast Cancer data, as bundled with
scikit-learn): the means of texture, smoothness, symmetry and fractal dimension, and the standard errors
(`... error`) of all ten nucleus measurements. Each row is one mass; `id` identifies it.

## Evaluation

Submissions are scored by the area under the ROC curve between the predicted probability that a mass
is malignant and the observed diagnosis.

## Submission file

For each `id` in test.csv, predict the probability that `malignant` is 1:

```
id,malignant
id_0003,0.1
id_0007,0.9
```

## Data

- train.csv: the measurements and the label `malignant` (1 malignant, 0 benign)
- test.csv: the measurements only
- sample_submission.csv: a submission in the right format
"""


def prepare(public: Path, private: Path) -> None:
    data = load_breast_cancer(as_frame=True)
    frame = data.data[COLUMNS + [c for c in data.data.columns if c.endswith(" error")]].round(6)
    frame.insert(0, "id", [f"id_{i:04d}" for i in range(len(frame))])
    frame["malignant"] = (data.target == 0).astype(int)
    train, test = train_test_split(frame, test_size=0.2, random_state=0, stratify=frame["malignant"])
    public.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=["malignant"]).to_csv(public / "test.csv", index=False)
    test[["id", "malignant"]].to_csv(private / "test.csv", index=False)
    sample = pd.DataFrame({"id": test["id"], "malignant": np.full(len(test), 0.5)})
    sample.to_csv(public / "sample_submission.csv", index=False)
    (public / "description.md").write_text(DESCRIPTION)


if __name__ == "__main__":
    prepare(HERE / "prepared" / "public", HERE / "prepared" / "private")
