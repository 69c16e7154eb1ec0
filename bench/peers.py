"""The novelty gate and a two-model ensemble on the LLM path, with the scripted model (docs/benchmarks.md).

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/peers.py [--budget N] [--candidates N] [--audit-rate P] [--embedder minilm|hashing]

Both runs use the built-in ``diabetes`` task, the greedy strategy, the random screener, local sandboxed
verifications and ``examples/scripted/diabetes.yaml`` (24 proposals, 24 implementations; a run that asks for
more gets model errors, so keep (budget - 1) * candidates at or below 24).

* ``gate``: ``novelty.enabled`` with the given embedder and audit rate, the implementer a copy of the
  script that gives every implementation twice, the second time differing only in spacing (a model that
  re-tries what it tried; the exact-duplicate check does not catch it); prints the gate's counts, reject
  rate, measured false-rejection rate (audited rejections that improved on their parent) and the
  verifications it saved (rejections not audited).
* ``ensemble``: ``roles.models.implementer`` is a list of two scripted models: the example script, and a copy
  whose every implementation sets ``STRENGTH = 1e5`` (a regularisation strong enough to lose to its parent);
  prints each member's calls, share and improved / observed outcomes.

Prints one JSON object; numbers are from one run each (seed 0), not averages.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _scripted import SCRIPT, rewritten, run_timed
from verifyless.config import load_config
from verifyless.report.peers import model_shares, novelty_rates
from verifyless.store import RunStore


def weak_copy(path: Path) -> Path:
    """The example script with ``STRENGTH = 1e5`` in every implementer reply (named ``weak``)."""
    return rewritten(
        path, lambda replies: [r.replace("STRENGTH = 1.0", "STRENGTH = 1e5") for r in replies], name="weak"
    )


def retry_copy(path: Path) -> Path:
    """The example script with every implementation given twice, the copy differing only in spacing.

    A model that re-tries what it already tried: the copy has another hash (so the exact-duplicate check
    lets it through) and the gate should reject it.
    """
    return rewritten(path, lambda replies: [x for r in replies for x in (r, r.replace(" = ", "  =  "))])


def one_run(db: Path, overrides: list[str]) -> tuple[RunStore, str, float]:
    common = ["task=diabetes", "strategy.name=greedy", "screener.name=random", "roles.kind=llm", f"store={db}"]
    cfg = load_config(overrides=common + overrides)
    store = RunStore(db)
    result, seconds = run_timed(cfg, store)
    return store, result.run_id, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--audit-rate", type=float, default=0.5)
    ap.add_argument("--embedder", default="minilm", choices=["minilm", "hashing"])
    args = ap.parse_args()
    size = [f"budget.verifications={args.budget}", f"engine.candidates={args.candidates}"]
    out: dict = {"budget": args.budget, "candidates": args.candidates}
    with tempfile.TemporaryDirectory() as tmp:
        retry = retry_copy(Path(tmp) / "retry.yaml")
        gate = [
            f"roles.models.default=scripted:{SCRIPT}",
            f"roles.models.implementer=scripted:{retry}",
            "novelty.enabled=true",
            f"novelty.embedder={args.embedder}",
            f"novelty.audit_rate={args.audit_rate}",
        ]
        store, run_id, wall = one_run(Path(tmp) / "gate.db", size + gate)
        with store:
            rates = novelty_rates(store, run_id)
            out["gate"] = {"embedder": args.embedder, "audit_rate": args.audit_rate, "wall_s": round(wall, 1)}
            out["gate"].update(rates.to_dict() if rates else {"checked": 0})
        weak = weak_copy(Path(tmp) / "weak.yaml")
        pair = [
            f"roles.models.default=scripted:{SCRIPT}",
            f"roles.models.implementer=[scripted:{SCRIPT}, scripted:{weak}]",
        ]
        store, run_id, wall = one_run(Path(tmp) / "ensemble.db", size + pair)
        with store:
            out["ensemble"] = {"wall_s": round(wall, 1), "members": [m.to_dict() for m in model_shares(store, run_id)]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
