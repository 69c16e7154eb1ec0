"""``verifyless bench ...``: measurement commands over stored runs and pool files.

The Typer sub-app is ``app`` (mount with ``main_app.add_typer(app, name="bench")``);
``collect_pools_command`` is the same function as ``bench collect-pools`` for
mounting as a top-level ``verifyless collect-pools``. Every command prints rich
tables and, with ``--out DIR``, writes the markdown report and PNG plots there.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from verifyless._cli.breakeven import breakeven_command
from verifyless._cli.common import STORE, TASK, console, key_values, out_file, out_folder, read_store
from verifyless._cli.data import bench_dataset
from verifyless.errors import ConfigError, TaskError
from verifyless.events import Finalised
from verifyless.metrics import critic as m
from verifyless.model import build_model
from verifyless.offline import compare as cmp
from verifyless.offline import plots, tables
from verifyless.offline import selection as sel
from verifyless.offline.pools import ScoreOracle, collect_pools, evaluate_screener, load_pools, save_pools
from verifyless.offline.scores import best_scheme, normalize, worst_observed
from verifyless.offline.selection import SelectionSummary, fitness_sign
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.store import RunStore
from verifyless.task import load_task

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Measure critics, selectors and arms from stored runs and pool files.",
)

_RUNS = typer.Argument(None, help="run ids (or unique prefixes)")
_N_BOOT = typer.Option(2000, help="bootstrap resamples")
_BOOT_SEED = typer.Option(0, help="seed of the bootstrap")
_LABEL = typer.Option([], "--label", help="ARM=RUN; repeat (unlabelled runs use their screener)")
_OUT = typer.Option(None, "--out", callback=out_folder, help="folder for the markdown report and PNG plots")


def _print(title: str, headers: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title, title_justify="left")
    for h in headers:
        table.add_column(h)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _write(out: Path | None, name: str, text: str) -> None:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")
        console.print(f"wrote {out / name}")


# ---------------------------------------------------------------------- critic


@app.command("critic")
def critic(
    runs: list[str] = _RUNS,
    store: Path = STORE,
    out: Path | None = _OUT,
    min_improving: int = typer.Option(3, help="improving children a parent needs for five-level labels"),
    bins: int = typer.Option(10, help="reliability-diagram bins"),
    repeats: int = typer.Option(5, help="subsamples per k for AUROC vs k"),
    seed: int = typer.Option(0, help="seed of the subsamples and the bootstrap"),
    dataset: Path | None = typer.Option(None, "--dataset", help="critic dataset: screen its bench split"),
    screener: str = typer.Option("critic", "--screener", help="with --dataset: registry screener name"),
    model: str | None = typer.Option(None, "--model", help="with --dataset: model spec for LLM screeners"),
    option: list[str] = typer.Option([], "--option", help="with --dataset: screener option KEY=VALUE"),
    split: str = typer.Option("bench", "--split", help="with --dataset: split to screen"),
) -> None:
    """Critic accuracy, calibration and uncertainty routing: from stored runs, or a dataset's bench split offline."""

    if dataset is not None:
        bench_dataset(
            dataset, _registry_screener(screener, model, option, seed), split=split, seed=seed, repeats=repeats, out=out
        )
        return
    if not runs:
        raise ConfigError("bench critic needs run ids (verifyless bench critic RUN...) or --dataset DIR")

    with read_store(store) as st:
        records = [
            r for run in runs for r in m.critic_records_from_store(st, st.resolve_run(run), min_improving=min_improving)
        ]
    if not records:
        console.print(
            "no judged candidate was verified in these runs (a critic-style screener must have produced "
            "votes, and the candidate a working verification)"
        )
        raise typer.Exit(1)
    groups = {"all": m.critic_metrics(records)}
    groups.update({f"stratum={k}": v for k, v in m.breakdown(records, "stratum").items()})
    groups.update({f"task={k}": v for k, v in m.breakdown(records, "task").items()})
    route, ks, cal = (
        m.routing_curve(records),
        m.auroc_vs_k(records, repeats=repeats, seed=seed),
        m.calibration(records, bins),
    )
    _print("critic metrics (%)", tables.CRITIC_HEADERS, tables.critic_rows(groups))
    _print(
        "uncertainty routing",
        ["T", "routed %", "error recall %", "errors", "accuracy of kept %"],
        tables.routing_rows(route),
    )
    _print("AUROC vs k", ["k", "AUROC", "std", "records"], tables.auroc_rows(ks))
    md = [
        "# Critic report\n",
        tables.critic_table(groups),
        "\n## Three-way confusion (rows = truth)\n",
        tables.confusion_table(groups["all"].confusion3),
    ]
    if groups["all"].confusion5 is not None:
        md += ["\n## Five-level confusion (rows = truth)\n", tables.confusion_table(groups["all"].confusion5)]
    md += [
        "\n## Routing\n",
        tables.routing_table(route),
        "\n## AUROC vs k\n",
        tables.auroc_table(ks),
        f"\nExpected calibration error: {tables.fmt(cal.ece)}; Brier score: {tables.fmt(cal.brier)}\n",
    ]
    _write(out, "critic.md", "".join(md))
    if out is not None:
        for path in (
            plots.plot_reliability(cal, out / "reliability.png"),
            plots.plot_auroc_vs_k({"critic": ks}, out / "auroc_k.png"),
            plots.plot_routing(route, out / "routing.png"),
        ):
            console.print(f"wrote {path}")


# ---------------------------------------------------------------------- selection


@app.command("selection")
def selection(
    runs: list[str] = typer.Argument(..., help="run ids (or unique prefixes)"),
    store: Path = STORE,
    out: Path | None = _OUT,
    target: str = typer.Option(
        "validation",
        help="validation | test | subtree: the best test score in each candidate's subtree, the RPM paper's label "
        "(test and subtree are hidden, reporting only)",
    ),
    min_gap: float = typer.Option(0.01, help="drop sibling pairs closer than this share of the pool's range"),
) -> None:
    """Selection advantage and pairwise accuracy on pools with at least two verified candidates."""

    summaries, finals, advantages = {}, [], []
    with read_store(store) as st:
        for run in runs:
            run_id = st.resolve_run(run)
            s = sel.summarize_selection(sel.pools_from_store(st, run_id, target=target), min_gap=min_gap)  # type: ignore[arg-type]
            summaries[run_id] = s
            final = _final_score(st, run_id, "validation" if target == "validation" else "test", "bounded")
            if s.advantage is not None and math.isfinite(final):
                advantages.append(s.advantage)
                finals.append(final)
    _print("selection", tables.SELECTION_HEADERS, tables.selection_rows(summaries))
    md = "# Selection report\n\n" + tables.selection_table(summaries)
    empty = [run_id for run_id, s in summaries.items() if s.n_pools == 0]
    if empty:
        line = f"{', '.join(empty)}: {sel.NO_POOLS_HINT}"
        console.print(f"[yellow]{line}[/]", highlight=False)
        md += f"\n{line}\n"
    corr = sel.correlation(advantages, finals)
    if corr.pearson is not None:
        line = (
            f"Across {corr.n} runs, selection advantage vs final score: Pearson {corr.pearson:.3f} "
            f"(p={corr.pearson_p:.3g}), Spearman {corr.spearman:.3f} (p={corr.spearman_p:.3g})"
        )
        console.print(line)
        md += f"\n{line}\n"
    _write(out, "selection.md", md)


# ---------------------------------------------------------------------- compare and curves


def _final_score(st: Any, run_id: str, target: str, scheme: str, s_min: float | None = None) -> float:
    """The run's final node score, normalised with its task's anchors (raw oriented if the task cannot be loaded).

    ``s_min``: the AIRS scheme's worst score observed across the agents compared on the task (``_worst_by_task``).
    """
    raw, row = _final_raw(st, run_id, target)
    task = _task(st.run(run_id).task)
    if task is None:
        fit = row.get("fitness")
        return math.nan if raw is None or fit is None else (float(raw) if fit == row.get("score") else -float(raw))
    chosen = scheme if scheme != "bounded" or best_scheme(task.anchors) == "bounded" else "raw"
    return normalize(raw, task.metric, task.anchors, chosen, s_min=s_min)  # type: ignore[arg-type]


def _worst_by_task(st: Any, run_ids: list[str], target: str) -> dict[str, float | None]:
    """Per task, the worst final score any of the runs reached (AIRS-Bench's s_min: across all agents)."""
    raws: dict[str, list[float | None]] = {}
    for run_id in run_ids:
        raws.setdefault(st.run(run_id).task, []).append(_final_raw(st, run_id, target)[0])
    out: dict[str, float | None] = {}
    for name, values in raws.items():
        task = _task(name)
        out[name] = None if task is None else worst_observed(values, task.metric)
    return out


def _final_raw(st: Any, run_id: str, target: str) -> tuple[float | None, dict[str, Any]]:
    """The run's final node's raw score (validation or hidden test) and its node row."""
    rows = {r["node_id"]: r for r in st.node_rows(run_id)}
    final_id = None
    for ev in st.events(run_id, Finalised):
        final_id = ev.record.node_id
    if final_id not in rows:
        ok = [r for r in rows.values() if r.get("fitness") is not None]
        final_id = max(ok, key=lambda r: r["fitness"])["node_id"] if ok else None
    row = rows.get(final_id or "", {})
    return row.get("test_score" if target == "test" else "score"), row


_TASKS: dict[str, Any] = {}


def _task(name: str):
    if name not in _TASKS:
        try:
            _TASKS[name] = load_task(name)
        except (TaskError, OSError, ValueError):
            _TASKS[name] = None
    return _TASKS[name]


def _arms(st: Any, runs: list[str], labels: list[str]) -> dict[str, list[str]]:
    """arm -> run ids; ``--label ARM=RUN`` wins, else the run's configured screener name (none: a usage error)."""

    if not runs and not labels:
        raise typer.BadParameter("give run ids and/or --label ARM=RUN")
    named: dict[str, str] = {}
    for item in labels:
        if "=" not in item:
            raise ConfigError(f"--label {item!r} must look like ARM=RUN")
        arm, run = item.split("=", 1)
        named[st.resolve_run(run.strip())] = arm.strip()
    arms: dict[str, list[str]] = {}
    for run in [*runs, *[r for r in named if r not in runs]]:
        run_id = st.resolve_run(run)
        arm = named.get(run_id) or str((st.run(run_id).config.get("screener") or {}).get("name", "unlabelled"))
        if run_id not in arms.setdefault(arm, []):
            arms[arm].append(run_id)
    return arms


@app.command("compare")
def compare(
    runs: list[str] = _RUNS,
    label: list[str] = _LABEL,
    store: Path = STORE,
    out: Path | None = _OUT,
    target: str = typer.Option("test", help="test (hidden, reported) | validation"),
    scheme: str = typer.Option("bounded", help="bounded | airs | raw normalisation"),
    n_boot: int = _N_BOOT,
    seed: int = _BOOT_SEED,
) -> None:
    """Final normalised score per arm with CIs, probability of improvement and verifications-to-reach."""

    with read_store(store) as st:
        arms = _arms(st, list(runs or []), label)
        tasks_of = {r: st.run(r).task for rs in arms.values() for r in rs}
        every = [r for rs in arms.values() for r in rs]
        worst = _worst_by_task(st, every, target) if scheme == "airs" else {}
        scores = {
            arm: _by_task({r: _final_score(st, r, target, scheme, worst.get(tasks_of[r])) for r in rs}, tasks_of)
            for arm, rs in arms.items()
        }
        curves = {arm: [cmp.curve_from_store(st, r) for r in rs] for arm, rs in arms.items()}
        signs = {r: fitness_sign(st.node_rows(r)) for rs in arms.values() for r in rs}
    estimates = {arm: cmp.arm_score(s, n_boot=n_boot, seed=seed) for arm, s in scores.items() if s}
    poi = {
        (a, b): cmp.probability_of_improvement(scores[a], scores[b], n_boot=n_boot, seed=seed)
        for a, b in itertools.permutations(estimates, 2)
        if set(scores[a]) & set(scores[b])
    }
    reaches = []
    for a, b in itertools.permutations(arms, 2):
        for task in sorted({c.task for c in curves[a]} & {c.task for c in curves[b]}):
            finals = [c.final for c in curves[b] if c.task == task and math.isfinite(c.final)]
            if finals:
                target_fit = float(sorted(finals)[len(finals) // 2])  # median run of B (upper median)
                found = [cmp.reach(c, target_fit) for c in curves[a] if c.task == task]
                sign = signs[next(c.run_id for c in curves[b] if c.task == task)]
                reaches.append((task, a, b, [dataclasses.replace(r, target=sign * r.target) for r in found]))
    _print(
        f"final {target} score ({scheme})", ["arm", "final score", "low", "high", "runs"], tables.arm_rows(estimates)
    )
    single = _single_run_note(scores, poi)
    if poi:
        _print("probability of improvement", ["A", "B", "P(A > B)", "low", "high"], tables.poi_rows(poi))
        if single:
            console.print(f"[yellow]{single}[/]", highlight=False)
    if reaches:
        _print(
            "verifications for A to reach B's final best (validation, target in the metric's units)",
            ["task", "A", "B", "target", "reached", "median verifications", "median seconds"],
            tables.reach_rows(reaches),
        )
    md = ["# Arm comparison\n\n", tables.arm_table(estimates)]
    if poi:
        md += ["\n## Probability of improvement\n\n", tables.poi_table(poi)]
        md += [f"\n{single}\n"] if single else []
    if reaches:
        md += ["\n## Verifications to reach\n\n", tables.reach_table(reaches)]
    _write(out, "compare.md", "".join(md))
    if out is not None:
        _plot_curves(curves, out, "verifications", n_boot, seed)


def _single_run_note(scores: dict[str, dict[str, list[float]]], poi: dict[tuple[str, str], Any]) -> str:
    """A warning when a compared arm has one run on every task: its P(A > B) is 0, 0.5 or 1 by construction."""
    compared = {arm for pair in poi for arm in pair}
    single = sorted(arm for arm in compared if all(len(v) == 1 for v in scores[arm].values()))
    if not single:
        return ""
    return (
        f"note: n = 1: arm(s) {', '.join(single)} have one run per task, so P(A > B) compares single runs "
        "(it can only be 0, 0.5 or 1) and says little about the arms; run more seeds per arm"
    )


def _by_task(values: dict[str, float], tasks_of: dict[str, str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for run_id, v in values.items():
        if math.isfinite(v):
            out.setdefault(tasks_of[run_id], []).append(v)
    return out


def _plot_curves(curves: dict[str, list[Any]], out: Path, by: str, n_boot: int, seed: int) -> None:
    for task in sorted({c.task for cs in curves.values() for c in cs}):
        bands = [
            cmp.curve_band([c for c in cs if c.task == task], arm, by=by, n_boot=n_boot, seed=seed)
            for arm, cs in curves.items()
            if any(c.task == task and len(c.best) for c in cs)
        ]
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in task)
        path = plots.plot_curves(
            bands,
            out / f"curves_{safe}_{by}.png",
            title=task,
            xlabel="verifications" if by == "verifications" else "evaluator seconds",
            ylabel="best validation fitness so far",
        )
        console.print(f"wrote {path}")


@app.command("curves")
def curves_cmd(
    runs: list[str] = _RUNS,
    label: list[str] = _LABEL,
    store: Path = STORE,
    out: Path = typer.Option(Path("bench-out"), "--out", callback=out_folder, help="folder for PNGs"),
    by: str = typer.Option("verifications", help="verifications | seconds"),
    n_boot: int = _N_BOOT,
    seed: int = _BOOT_SEED,
) -> None:
    """Best-so-far validation fitness against verifications (or evaluator seconds), one PNG per task."""

    with read_store(store) as st:
        arms = _arms(st, list(runs or []), label)
        curves = {arm: [cmp.curve_from_store(st, r) for r in rs] for arm, rs in arms.items()}
    rows = [[arm, c.run_id, c.task, str(len(c.best)), tables.fmt(c.final, 4)] for arm, cs in curves.items() for c in cs]
    _print("runs", ["arm", "run", "task", "verifications", "final best fitness"], rows)
    _plot_curves(curves, out, by, n_boot, seed)


# ---------------------------------------------------------------------- pools


def collect_pools_command(
    task: str = TASK,
    parents: int = typer.Option(3, "--parents", help="evolution steps (one pool each)"),
    n: int = typer.Option(8, "--n", help="candidates per parent, all verified"),
    out: Path = typer.Option(..., "--out", callback=out_file, help="pool file to write (JSON lines)"),
    seed: int = typer.Option(0, "--seed", help="seed of the collection run"),
    store: Path | None = typer.Option(None, "--store", help="also record the run here"),
) -> None:
    """Collect pools of fully verified candidates for offline selector replay."""

    st = None
    if store is not None:
        store.parent.mkdir(parents=True, exist_ok=True)
        st = RunStore(store)
    try:
        pools = collect_pools(
            task, parents=parents, n_per_parent=n, seed=seed, store=st, progress=lambda msg: console.print(msg)
        )
    finally:
        if st is not None:
            st.close()
    path = save_pools(pools, out)
    rows = []
    for p in pools:
        ok = [c for c in p.candidates if c.fitness is not None]
        best = max(ok, key=lambda c: c.fitness).score if ok else None  # type: ignore[arg-type, return-value]
        rows.append(
            [p.pool_id, tables.fmt(p.parent_score, 4), str(len(p.candidates)), str(len(ok)), tables.fmt(best, 4)]
        )
    _print("pools", ["pool", "parent score", "candidates", "verified ok", "best child score"], rows)
    console.print(f"wrote {path}")


app.command("collect-pools")(collect_pools_command)
app.command("breakeven")(breakeven_command)


@app.command("replay-pools")
def replay_pools(
    file: Path = typer.Argument(..., help="pool file from collect-pools"),
    screener: list[str] = typer.Option(
        ["random"], "--screener", help="registry name, or test-oracle / validation-oracle; repeat"
    ),
    model: str | None = typer.Option(None, "--model", help="model spec for LLM screeners"),
    option: list[str] = typer.Option([], "--option", help="screener option KEY=VALUE (JSON values)"),
    target: str = typer.Option("validation", help="score the pick on validation or test"),
    seed: int = typer.Option(0, help="seed of the screeners' draws"),
    task: str | None = typer.Option(
        None,
        "--task",
        help="the pools' task folder or name (default: the folder recorded at collection, else the name)",
    ),
    out: Path | None = _OUT,
) -> None:
    """Run screeners on stored pools (no verification) and report how good their picks were."""

    pools = load_pools(file)
    tasks = {pools[0].task: load_task(task)} if task else None
    summaries: dict[str, SelectionSummary] = {}
    for name in screener:
        if name in ("test-oracle", "validation-oracle"):
            scr: Any = ScoreOracle.from_pools(pools, "test" if name == "test-oracle" else "validation")
        else:
            scr = _registry_screener(name, model, option, seed)
        rep = evaluate_screener(pools, scr, target=target, seed=seed, tasks=tasks)
        summaries[name] = rep.summary
        if rep.normalized_ci is not None:
            console.print(f"{name}: normalised advantage {rep.normalized_ci}")
    _print(f"selector replay on {file} ({target})", tables.SELECTION_HEADERS, tables.selection_rows(summaries))
    _write(out, "replay.md", f"# Screener replay: {file.name} ({target})\n\n" + tables.selection_table(summaries))


def _registry_screener(name: str, model: str | None, options: list[str], seed: int):
    opts = key_values(options)
    models = {}
    if model:
        models["default"] = build_model(model)
    return build_screener(name, models=models, options=SCREENERS.validate(name, opts), seed=seed)


__all__ = ["app", "collect_pools_command"]
