"""Critic datasets on disk: splits, class balancing, the dataset card, save and load.

Layout of a dataset folder::

    DIR/dataset_dict.json, DIR/sft/, DIR/grpo/, DIR/bench/   (DatasetDict.save_to_disk)
    DIR/parquet/<split>.parquet                               (the same rows as Parquet)
    DIR/card.json, DIR/README.md                              (the dataset card)

``README.md`` is the card Hugging Face reads: a YAML metadata block (``pretty_name``, ``tags``,
``size_categories``, ``task_categories``, one ``configs`` entry whose ``data_files`` name the Parquet
splits) above the readable card. Folders written before it hold ``card.md`` instead; they load the same
(everything is read from ``card.json``).

Splits (``split_rows``):

* ``grpo``: examples from improvement-driven collections (source
  ``collect-grpo``), balanced across improve / tie / lose by seeded random
  downsampling to the smallest non-empty class (``balance``; an empty class
  is reported as absent);
* ``bench`` and ``sft``: every other example. Examples are grouped by parent
  program (task + program hash; or by task with ``by="task"``) and whole
  groups go to ``bench`` until it holds ``bench_fraction`` of the rows, the
  rest to ``sft``. Groups that also hold ``sft``/``bench`` examples are never
  used for ``grpo``: their grpo-collected rows are dropped and counted, so no
  parent appears in two splits.
* once strata exist (after critique synthesis), ``balance_bench`` downsamples
  the bench split to equal counts over the strata present in it (rows
  without a stratum leave the bench); dropped rows are not moved to ``sft``
  (their parents are in the bench).
"""

from __future__ import annotations

import datetime as _dt
import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from verifyless.critic_data.schema import COLUMNS, DEFAULTS, SCHEMA_VERSION, SPLITS, STRATA, check_row, features
from verifyless.errors import ConfigError
from verifyless.outcome import FIVE, THREE

Rows = list[dict[str, Any]]


def balance(
    rows: Sequence[Mapping[str, Any]], rng: random.Random, key: str = "label3", classes: Sequence[str] = THREE
) -> tuple[Rows, dict[str, Any]]:
    """Downsample every non-empty class of ``key`` to the smallest non-empty class's count (seeded).

    Input order is kept. Returns the kept rows and ``{"before": counts,
    "after": counts, "absent": [...]}``. An empty class (e.g. no exact ties on
    a continuous metric) cannot be balanced up: it is named in ``absent`` and
    the others are balanced among themselves; widen ``--tie-tolerance`` to get
    ties on such metrics.
    """
    by_class: dict[str, list[int]] = {c: [] for c in classes}
    for i, row in enumerate(rows):
        if row.get(key) in by_class:
            by_class[str(row[key])].append(i)
    present = [c for c in classes if by_class[c]]
    target = min(len(by_class[c]) for c in present) if present else 0
    keep: set[int] = set()
    for c in present:
        keep.update(rng.sample(by_class[c], target))
    kept = [dict(rows[i]) for i in sorted(keep)]
    return kept, {
        "before": {c: len(by_class[c]) for c in classes},
        "after": {c: target if c in present else 0 for c in classes},
        "absent": [c for c in classes if c not in present],
    }


def _group(row: Mapping[str, Any], by: str) -> str:
    if by == "task":
        return str(row["task"])
    return f"{row['task']}|{row.get('parent_hash') or row['run_id'] + '/' + row['parent_id']}"


def split_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    seed: int = 0,
    bench_fraction: float = 0.12,
    by: str = "parent",
    balance_grpo: bool = True,
) -> tuple[dict[str, Rows], dict[str, Any]]:
    """Assign rows to ``sft`` / ``grpo`` / ``bench`` (see module docstring); returns splits and a report."""
    if by not in ("parent", "task"):
        raise ConfigError(f"split by {by!r} is unknown: use parent or task")
    if not 0.0 <= bench_fraction <= 1.0:
        raise ConfigError(f"bench fraction {bench_fraction} must lie in [0, 1]")
    rng = random.Random(seed)
    all_rows = [dict(r) for r in rows]
    main_groups = {_group(r, by) for r in all_rows if r["source"] != "collect-grpo"}
    grpo_rows = [r for r in all_rows if r["source"] == "collect-grpo" and _group(r, by) not in main_groups]
    dropped = sum(1 for r in all_rows if r["source"] == "collect-grpo") - len(grpo_rows)
    report: dict[str, Any] = {
        "seed": seed,
        "bench_fraction": bench_fraction,
        "by": by,
        "grpo_dropped_shared_parent": dropped,
    }
    if balance_grpo and grpo_rows:
        grpo_rows, report["grpo_balance"] = balance(grpo_rows, rng)
    groups: dict[str, Rows] = {}
    for r in all_rows:
        if r["source"] != "collect-grpo":
            groups.setdefault(_group(r, by), []).append(r)
    order = sorted(groups)
    rng.shuffle(order)
    total = sum(len(g) for g in groups.values())
    bench: Rows = []
    sft: Rows = []
    for key in order:
        target = bench if len(bench) < bench_fraction * total and bench_fraction > 0 else sft
        target.extend(groups[key])
    return {"sft": sft, "grpo": grpo_rows, "bench": bench}, report


def balance_bench(splits: Mapping[str, Rows], seed: int = 0) -> tuple[dict[str, Rows], dict[str, Any] | None]:
    """Equal bench counts over the strata present in the bench split; unchanged (report None) without strata.

    Rows without a stratum (synthesis failed) leave the bench.
    """
    bench = splits.get("bench", [])
    if not any(r.get("stratum") for r in bench):
        return dict(splits), None
    kept, report = balance(bench, random.Random(f"{seed}:bench"), key="stratum", classes=STRATA)
    return {**splits, "bench": kept}, report


# ---------------------------------------------------------------------- card


def card_data(
    splits: Mapping[str, Rows],
    *,
    settings: Mapping[str, Any],
    runs: Sequence[Mapping[str, Any]] = (),
    models: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The dataset card as JSON-able data: schema, counts and distributions per split, provenance."""
    rows = [r for s in SPLITS for r in splits.get(s, [])]
    per_split = {}
    for name in SPLITS:
        part = splits.get(name, [])
        per_split[name] = {
            "rows": len(part),
            "label3": {c: sum(r["label3"] == c for r in part) for c in THREE},
            "label5": {c: sum(r.get("label5") == c for r in part) for c in FIVE}
            | {"none": sum(r.get("label5") is None for r in part)},
            "strata": {c: sum(r.get("stratum") == c for r in part) for c in STRATA}
            | {"none": sum(r.get("stratum") is None for r in part)},
            "critiques": sum(r.get("critique") is not None for r in part),
            "parents": len({_group(r, "parent") for r in part}),
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "columns": list(COLUMNS),
        "written": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "splits": per_split,
        "tasks": dict(sorted(Counter(str(r["task"]) for r in rows).items())),
        "run_ids": sorted({str(r["run_id"]) for r in rows} | {str(r.get("run_id")) for r in runs if r.get("run_id")}),
        "runs": list(runs),
        "models": sorted(set(models)),
        "dates": sorted({str(r["created"])[:10] for r in rows}),
        "settings": dict(settings),
        "data_report": _data_report_use(rows),
        **dict(extra or {}),
    }


def _data_report_line(use: Mapping[str, Any] | None) -> str:
    if not use:
        return "Data report in the critic prompts: not recorded (written before it was)."
    return (
        f"Data report in the critic prompts: {use['in_prompts']} ({use['rows_with']} rows with their run's report, "
        f"{use['rows_without']} without); a critic trained on these rows is served the same prompt."
    )


def _data_report_use(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Whether the critic prompts of the rows carry their run's data report: rows with and without one."""
    with_report = sum(bool(r.get("data_report")) for r in rows)
    prompts = "all" if rows and with_report == len(rows) else "none" if not with_report else "some"
    return {"in_prompts": prompts, "rows_with": with_report, "rows_without": len(rows) - with_report}


def card_metadata(card: Mapping[str, Any]) -> dict[str, Any]:
    """The YAML metadata block of ``README.md`` (the keys Hugging Face's dataset viewer and hub read)."""
    rows = sum(int(s["rows"]) for s in card["splits"].values())
    return {
        "pretty_name": f"verifyless critic dataset (schema version {card['schema_version']})",
        "tags": ["verifyless", "code", "critic", "program-search"],
        "task_categories": ["text-generation"],
        "size_categories": [_size_category(rows)],
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": name, "path": f"parquet/{name}.parquet"} for name in card["splits"]],
            }
        ],
    }


def _size_category(rows: int) -> str:
    """Hugging Face's ``size_categories`` bucket for ``rows``."""
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if rows < limit:
            return name
    return "n>1M"


def card_readme(card: Mapping[str, Any]) -> str:
    """``README.md``: the metadata block between ``---`` lines, then ``card_markdown``."""
    import yaml

    block = yaml.safe_dump(card_metadata(card), sort_keys=False, allow_unicode=True)
    return f"---\n{block}---\n\n{card_markdown(card)}"


def card_markdown(card: Mapping[str, Any]) -> str:
    """A readable card (markdown) from ``card_data``."""
    lines = [
        f"# Critic dataset (schema version {card['schema_version']})",
        "",
        f"Written {card['written']}. Tasks: " + ", ".join(f"{t} ({n})" for t, n in card["tasks"].items()),
        f"Runs: {', '.join(card['run_ids']) or '-'}. Models: {', '.join(card['models']) or 'offline roles'}.",
        f"Dates: {', '.join(card['dates']) or '-'}.",
        "",
        "## Splits",
        "",
        "| split | rows | parents | improve | tie | lose | BigWin | MediumWin | SmallWin | Tie | Lose | "
        "no 5-level | sampled | revised | guided | critiques |",
        "|" + "---|" * 16,
    ]
    for name, s in card["splits"].items():
        l3, l5, st = s["label3"], s["label5"], s["strata"]
        lines.append(
            f"| {name} | {s['rows']} | {s['parents']} | "
            + " | ".join(str(l3[c]) for c in THREE)
            + " | "
            + " | ".join(str(l5[c]) for c in FIVE)
            + f" | {l5['none']} | "
            + " | ".join(str(st[c]) for c in STRATA)
            + f" | {s['critiques']} |"
        )
    lines += [
        "",
        "## Schema",
        "",
        "Columns: " + ", ".join(f"`{c}`" for c in card["columns"]) + ".",
        "See docs/design/critic-data.md for their meaning.",
        "",
        _data_report_line(card.get("data_report")),
        "",
        "## Settings",
        "",
        "```json",
        json.dumps(card["settings"], indent=2, sort_keys=True, default=str),
        "```",
    ]
    if card.get("runs"):
        lines += ["", "## Source runs", "", "| run | task | source | created | settings |", "|---|---|---|---|---|"]
        for r in card["runs"]:
            conf = r.get("config") or {}
            keep = {
                k: conf[k]
                for k in ("parents", "children", "mode", "seed", "caps", "wiring", "strategy", "screener")
                if k in conf
            }
            lines.append(
                f"| {r.get('run_id')} | {r.get('task', '')} | {r.get('source', '')} | {r.get('created', '')} | "
                f"`{json.dumps(keep, sort_keys=True, default=str)}` |"
            )
    if card.get("label_table"):
        lines += [
            "",
            "## Labels by task and parent",
            "",
            "| task | parent | children | infeasible | improve | tie | lose | 5-level | " + " | ".join(FIVE) + " |",
            "|" + "---|" * (8 + len(FIVE)),
        ]
        for r in card["label_table"]:
            lines.append(
                f"| {r['task']} | {r['parent_id']} | {r['children']} | {r['infeasible']} | "
                + " | ".join(str(r[c]) for c in THREE)
                + f" | {'yes' if r['five_level'] else 'dropped'} | "
                + " | ".join(str(r[c]) for c in FIVE)
                + " |"
            )
    for key in ("grpo_balance", "bench_balance", "synthesis", "split_report"):
        if card.get(key) is not None:
            lines += [
                "",
                f"## {key.replace('_', ' ')}",
                "",
                "```json",
                json.dumps(card[key], indent=2, sort_keys=True, default=str),
                "```",
            ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- save / load


def save_dataset(splits: Mapping[str, Rows], out: str | Path, card: Mapping[str, Any]) -> Path:
    """Write the splits (Arrow via ``save_to_disk``, plus Parquet) and the card into ``out``."""
    import datasets
    from datasets import Dataset, DatasetDict

    datasets.disable_progress_bars()  # the library does not print; the CLI reports what was written
    out = Path(out)
    feats = features()
    dd = DatasetDict()
    for name in SPLITS:
        part = list(splits.get(name, []))
        for row in part:
            check_row(row)
        dd[name] = Dataset.from_dict(
            {c: [row.get(c, DEFAULTS.get(c)) for row in part] for c in COLUMNS}, features=feats
        )
    out.mkdir(parents=True, exist_ok=True)
    dd.save_to_disk(str(out), num_shards={name: 1 for name in dd})  # one shard: an empty split stays loadable
    (out / "parquet").mkdir(exist_ok=True)
    for name, ds in dd.items():
        ds.to_parquet(str(out / "parquet" / f"{name}.parquet"))
    (out / "card.json").write_text(json.dumps(card, indent=2, sort_keys=True, default=str), encoding="utf-8")
    (out / "README.md").write_text(card_readme(card), encoding="utf-8")
    return out


def read_card(path: str | Path) -> dict[str, Any]:
    """The card of the dataset at ``path`` (ConfigError when there is none)."""
    card = Path(path) / "card.json"
    if not card.is_file():
        raise ConfigError(
            f"{path} is not a critic dataset (no card.json); build one with `verifyless data collect` "
            "or `verifyless data from-runs`"
        )
    return json.loads(card.read_text(encoding="utf-8"))


def load_critic_dataset(path: str | Path) -> Any:
    """The ``DatasetDict`` at ``path``; ConfigError for a missing folder or another schema version.

    A dataset written by an older schema cannot be migrated (version 1 is the
    first); the error says to rebuild it from its runs.
    """
    import datasets
    from datasets import load_from_disk

    datasets.disable_progress_bars()
    card = read_card(path)
    version = card.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ConfigError(
            f"{path} was written with critic-dataset schema version {version}; this verifyless reads version "
            f"{SCHEMA_VERSION}. Rebuild it: `verifyless data from-runs RUN... --store PATH --out DIR`"
        )
    dd = load_from_disk(str(path))
    for name, ds in list(dd.items()):
        for column, value in DEFAULTS.items():  # written before the column existed: its meaning is the default
            if column not in ds.column_names:
                dd[name] = ds = ds.add_column(column, [value] * len(ds))
        missing = [c for c in COLUMNS if c not in ds.column_names]
        if missing:
            raise ConfigError(
                f"{path}: split {name} lacks columns {missing} (schema version {SCHEMA_VERSION}); "
                "rebuild the dataset from its runs"
            )
    return dd


def splits_of(dd: Any) -> dict[str, Rows]:
    """Plain row lists per split of a loaded ``DatasetDict``."""
    return {name: [dict(r) for r in dd[name]] if name in dd else [] for name in SPLITS}


__all__ = [
    "balance",
    "balance_bench",
    "card_data",
    "card_markdown",
    "load_critic_dataset",
    "read_card",
    "save_dataset",
    "split_rows",
    "splits_of",
]
