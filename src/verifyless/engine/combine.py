"""Combining several programs' output files into one (the top-K ensemble submission, ``engine/submission.py``).

``combine_file(rule, name, members, out)`` reads the file ``name`` from each member's output folder (best-ranked
member first) and writes the combination to ``out/name``, as ``Task.ensemble`` (``task.base.Ensemble``) says:

* without ``key``: numbers only, no header (comma- or space-separated, as ``numpy.loadtxt`` reads them), one value
  per row or a 2-D table, the same shape for every member, matched by position;
* with ``key``: a CSV with a header, rows matched on the key columns (every member must hold the same keys; the
  first member's row order and column order are kept), every other column combined.

``mean`` averages numbers; ``vote`` keeps each cell's most frequent value, a tie going to the value of the
best-ranked member among the tied. A problem with the members' files (missing, shapes or keys that differ, text
where ``mean`` needs numbers) is returned as a one-line reason, never raised: it is the candidates' output.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from verifyless.task.base import Ensemble

__all__ = ["combine_file", "vote"]


def combine_file(rule: Ensemble, name: str, members: Sequence[Path], out: Path) -> str | None:
    """Write the combination of ``members``' ``name`` files to ``out / name``; None, or why it could not."""
    missing = [str(i) for i, m in enumerate(members) if not (m / name).is_file()]
    if missing:
        return f"member(s) {', '.join(missing)} wrote no {name}"
    try:
        if rule.key:
            return _combine_keyed(rule, name, members, out)
        return _combine_plain(rule, name, members, out)
    except ValueError as exc:  # unreadable numbers, a malformed CSV
        return f"{name} could not be combined: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def vote(values: Sequence[object]) -> object:
    """The most frequent of ``values``; a tie goes to the earliest of the tied (the best-ranked member's)."""
    counts = Counter(values)
    top = max(counts.values())
    return next(v for v in values if counts[v] == top)


def _combine_plain(rule: Ensemble, name: str, members: Sequence[Path], out: Path) -> str | None:
    delimiter = "," if "," in (members[0] / name).read_text().split("\n", 1)[0] else None
    arrays = [np.loadtxt(m / name, delimiter=delimiter, ndmin=1) for m in members]
    if len({a.shape for a in arrays}) != 1:
        return f"members wrote {name} with different shapes"
    stacked = np.stack(arrays)
    if rule.combine == "mean":
        combined = stacked.mean(axis=0)
    else:
        flat = stacked.reshape(len(arrays), -1)
        combined = np.array([vote(list(flat[:, j])) for j in range(flat.shape[1])]).reshape(arrays[0].shape)
    np.savetxt(out / name, combined, fmt="%.10g", delimiter=delimiter or " ")
    return None


def _combine_keyed(rule: Ensemble, name: str, members: Sequence[Path], out: Path) -> str | None:
    import pandas as pd  # the tabular tasks' dependency; keyed outputs are CSVs

    frames = [pd.read_csv(m / name, dtype=str, keep_default_na=False) for m in members]
    key = list(rule.key)
    lacking = [c for c in key if c not in frames[0].columns]
    if lacking:
        return f"{name} lacks the key column(s) {', '.join(lacking)}"
    first = frames[0]
    order = [tuple(row) for row in first[key].to_numpy()]
    if len(set(order)) != len(order):
        return f"{name} repeats a key ({', '.join(key)})"
    aligned = []
    for i, frame in enumerate(frames):
        if list(frame.columns) != list(first.columns) or len(frame) != len(first):
            return f"member {i} wrote {name} with other columns or rows than the best member"
        rows = {tuple(row): j for j, row in enumerate(frame[key].to_numpy())}
        if set(rows) != set(order):
            return f"member {i} wrote {name} with other keys than the best member"
        aligned.append(frame.iloc[[rows[k] for k in order]])
    values = [c for c in first.columns if c not in key]
    result = first[key].copy()
    for column in values:
        cells = np.stack([a[column].to_numpy() for a in aligned])
        if rule.combine == "mean":
            result[column] = [f"{v:.10g}" for v in cells.astype(float).mean(axis=0)]
        else:
            result[column] = [vote(list(cells[:, j])) for j in range(cells.shape[1])]
    result.to_csv(out / name, index=False)
    return None
