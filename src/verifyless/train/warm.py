"""Warm start by default: a new run of a task fits ``critic-rm`` on the store's earlier runs of that task.

The composition root (``wiring.build_engine``) calls ``warm_head`` for a new run whose screener is, or wraps, a
``critic-rm`` without a ``path`` (the default screener is ``adaptive`` around it) unless ``screener.warm_start`` is
false:

1. **Earlier runs**: every run in the store of the same task (``task.identity.same_task``: the task fingerprint,
   or for runs stored before fingerprints the task's name and baseline program), search runs and data collections, oldest first.
2. **Pairs**: their verified parent -> child pairs (``train.reward.pairs_from_runs``, the pairs ``train critic-rm``
   and ``data from-runs`` use). Fewer than ``MIN_PAIRS`` or a single label: no head, the run starts cold.
3. **Held-out check** (``check_split``): with two runs or more the newest is the bench, as ``train critic-rm``
   does; with one run, every other parent's children (leaked pairs dropped). Pairwise accuracy of the head fitted
   on the rest, with a bootstrap interval, and a verdict (``verdict``).
4. **Head**: fitted on every pair (``screen.reward.fit_head``, seconds), tagged ``warm@<sha256 prefix>``.
5. **Record**: the pairs (texts, label, run, program hashes), the head's weights, the check, the verdict and the
   one line said to the user go into one blob of the run store; the run's configuration pins the blob's hash
   (``screener...options.warm``) and the run's first events include ``warm_start`` (tag, runs, pairs by their
   run and program hashes, the check). A resume or a replay reloads that blob (``load_warm``): the same head, bit
   for bit, never a new fit on what the store holds by then.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from verifyless.errors import ConfigError
from verifyless.screen.features import TextEncoder, make_text_encoder
from verifyless.screen.reward import (
    HeadSettings,
    PairFeaturizer,
    TextLabel,
    WarmHead,
    arrays_tag,
    fit_head,
    head_record,
)
from verifyless.task.base import Task
from verifyless.task.identity import identity_of, same_task
from verifyless.train.reward import MIN_PAIRS, check_split, held_out, pairs_from_runs, verdict


def earlier_runs(store: Any, task: Task) -> list[str]:
    """Ids of the store's runs of ``task`` (``same_task``; world collections left out), oldest first."""
    runs = [r for r in store.runs() if (r.config or {}).get("kind") != "world" and same_task(store, r, task)]
    return [r.run_id for r in sorted(runs, key=lambda r: r.created)]


def warm_head(
    store: Any,
    task: Task,
    *,
    encoder: str,
    C: float = 0.1,
    tie: float | None = None,
    text_encoder: TextEncoder | None = None,
) -> tuple[WarmHead | None, str]:
    """A head fitted on the store's earlier runs of ``task``, recorded in ``store`` (module docstring), and the one
    line that says what happened; (None, why) when there is nothing to start from."""
    started = time.monotonic()
    runs = earlier_runs(store, task)
    if not runs:
        return None, f"warm start: none (no earlier run of {task.name} in this store); critic-rm starts cold"
    pairs = pairs_from_runs(store, runs, tie=tie)
    labels = {p.label for p in pairs}
    if len(pairs) < MIN_PAIRS or len(labels) < 2:
        return None, (
            f"warm start: none ({len(runs)} earlier runs of {task.name} hold {len(pairs)} verified pairs with "
            f"{len(labels)} outcome{'s' if len(labels) != 1 else ''}); critic-rm starts cold"
        )
    settings = HeadSettings(C=C, encoder=encoder)
    featurizer = PairFeaturizer(text_encoder or make_text_encoder(encoder), settings.features)  # type: ignore[arg-type]
    split = check_split(pairs)
    check = held_out(featurizer, split, settings) if split is not None else None
    judged = verdict(check, len(pairs))
    head = fit_head(featurizer, pairs, settings)
    tag = arrays_tag("warm", head)
    runs_said = f"{len(runs)} earlier run{'s' if len(runs) > 1 else ''}"
    line = f"warm start: critic-rm from {runs_said}, {len(pairs)} pairs, {judged.line}"
    if judged.warning:
        line += f" (warning: {judged.warning})"
    record = {
        "kind": "critic-rm warm start",
        "task_identity": identity_of(task).to_dict(),
        "runs": runs,
        "tag": tag,
        "head": head_record(head),
        "pairs": [
            {
                "parent_text": p.parent_text,
                "child_text": p.child_text,
                "label": p.label,
                "delta": p.delta,
                "run_id": p.group,
                "parent": p.parent_key,
                "child": p.child_key,
            }
            for p in pairs
        ],
        "settings": dataclasses.asdict(settings),
        "held_out": check,
        "verdict": dataclasses.asdict(judged),
        "line": line,
        "seconds": time.monotonic() - started,
    }
    digest = store.put_blob(json.dumps(record, default=str))
    labelled = tuple(TextLabel(p.parent_text, p.child_text, p.label) for p in pairs)
    return WarmHead(dataclasses.replace(head, tag=tag, card=record), labelled, digest, record), line


def load_warm(store: Any, digest: str) -> WarmHead:
    """The warm start a run recorded (its blob), checked against its tag; ``ConfigError`` when it is missing."""
    try:
        record = json.loads(store.get_blob(digest))
    except Exception as exc:  # noqa: BLE001 - a missing or corrupt blob is one message with the fix
        raise ConfigError(
            f"the run's critic-rm warm start (blob {digest[:16]}...) is not in this store ({exc}); resume the run "
            "in the store it was started in"
        ) from exc
    warm = WarmHead.from_record(record, digest)
    if arrays_tag("warm", warm.head) != warm.tag:
        raise ConfigError(f"the run's critic-rm warm start (blob {digest[:16]}...) does not match its tag {warm.tag}")
    return warm


__all__ = ["earlier_runs", "load_warm", "warm_head"]
