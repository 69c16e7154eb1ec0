"""``verifyless bench breakeven``: when does screening pay for itself? (replays on pool worlds, no verification).

Mounted in ``verifyless._cli.bench``; the analysis lives in ``verifyless.offline.breakeven``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import typer

from verifyless._cli.common import console, out_folder
from verifyless.builtin import worlds_dir
from verifyless.errors import ConfigError
from verifyless.offline.breakeven import CostModel, breakeven_grid
from verifyless.offline.worlds import load_worlds, world_paths

DEFAULT_WORLDS = worlds_dir()


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ConfigError(f"--{what} must be comma-separated numbers, got {text!r}") from exc


def _load(worlds: Path, tasks: Sequence[str] | None) -> dict:
    paths = world_paths(worlds) if worlds.is_dir() else [worlds]
    if not paths or not all(p.exists() for p in paths):
        raise ConfigError(
            f"no world files at {worlds}; collect them with `python bench/pools.py TASK` or pass --worlds DIR"
        )
    loaded = load_worlds(paths)
    if tasks:
        missing = sorted(set(tasks) - set(loaded))
        if missing:
            raise ConfigError(f"no world for {', '.join(missing)} in {worlds}; have {', '.join(sorted(loaded))}")
        loaded = {t: loaded[t] for t in tasks}
    return loaded


def breakeven_command(
    worlds: Path = typer.Option(DEFAULT_WORLDS, "--worlds", help="world file or folder of *.jsonl worlds"),
    task: list[str] | None = typer.Option(None, "--task", help="only these tasks (repeat)"),
    budget: int = typer.Option(24, help="verifications per replayed run (baseline included)"),
    seeds: int = typer.Option(20, help="replays per setting (seeds 0..S-1)"),
    dir3: str = typer.Option("0.333,0.466,0.55,0.607,0.633,0.75,0.9,1.0", help="critic Dir-3 accuracies"),
    n: str = typer.Option("4,8,16", help="candidates per expansion (N)"),
    k: str = typer.Option("1,3,5", help="critic samples per candidate (k)"),
    rho: float = typer.Option(0.7, help="per-pair error correlation across the k samples"),
    tier_noise: float = typer.Option(0.5, help="probability an 'improve' sample names a random tier"),
    locality: float = typer.Option(1.0, help="proposal locality around the parent (0 = uniform)"),
    tokens: float = typer.Option(2500.0, help="critic tokens per sample (prompt + reply)"),
    usd_per_mtok: float = typer.Option(3.0, help="critic price, $ per million tokens"),
    usd_per_hour: float = typer.Option(2.0, help="verification price, $ per hour of verification"),
    out: Path | None = typer.Option(
        None, "--out", callback=out_folder, help="folder for breakeven.md, breakeven.csv, breakeven.png"
    ),
) -> None:
    """Headroom captured, verifications-to-reach and break-even verification cost vs critic Dir-3, N and k."""
    import time

    started = time.monotonic()
    loaded = _load(worlds, task)
    cost = CostModel(tokens, usd_per_mtok, usd_per_hour)
    rows = breakeven_grid(
        loaded,
        dir3s=_floats(dir3, "dir3"),
        ns=[int(x) for x in _floats(n, "n")],
        ks=[int(x) for x in _floats(k, "k")],
        budget=budget,
        seeds=range(seeds),
        rho=rho,
        tier_noise=tier_noise,
        locality=locality,
        cost=cost,
    )
    text = breakeven_markdown(
        rows,
        budget=budget,
        seeds=seeds,
        rho=rho,
        tier_noise=tier_noise,
        cost=cost,
        worlds={t: len(w) for t, w in loaded.items()},
        seconds=time.monotonic() - started,
    )
    console.print(text, markup=False, soft_wrap=True)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "breakeven.md").write_text(text, encoding="utf-8")
        (out / "breakeven.csv").write_text(breakeven_csv(rows), encoding="utf-8")
        plot_breakeven(rows, out / "breakeven.png")
        console.print(f"wrote {out}/breakeven.md, breakeven.csv, breakeven.png")


def _secs(x: float) -> str:
    if not math.isfinite(x):
        return "never"
    return f"{x:.0f} s" if x < 600 else f"{x / 60:.0f} min"


def breakeven_markdown(
    rows: Sequence,
    *,
    budget: int,
    seeds: int,
    rho: float,
    tier_noise: float,
    cost: object,
    worlds: dict,
    seconds: float,
) -> str:
    head = (
        f"Break-even: budget {budget}, {seeds} seeds per setting, rho {rho}, tier noise {tier_noise}; "
        f"{cost}; worlds "
        + ", ".join(f"{t} ({n} points)" for t, n in sorted(worlds.items()))
        + f"; {seconds:.0f} s.\n\n"
    )
    lines = [
        "| task | Dir-3 | N | k | headroom captured | verif. to reach random / budget (reached) "
        "| verif. saved vs a chance critic | break-even verification length |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.task} | {r.dir3:.3f} | {r.n_candidates} | {r.k} | {r.headroom:.2f} | {r.reach:.2f} "
            f"({r.reached}/{r.pairs}) | {r.saved:.1f} | {_secs(r.breakeven_s)} |"
        )
    return head + "\n".join(lines) + "\n"


def breakeven_csv(rows: Sequence) -> str:
    out = ["task,dir3,n,k,headroom,reach,reached,pairs,saved,breakeven_s"]
    out += [
        f"{r.task},{r.dir3},{r.n_candidates},{r.k},{r.headroom:.4f},{r.reach:.4f},{r.reached},{r.pairs},"
        f"{r.saved:.3f},{r.breakeven_s:.3f}"
        for r in rows
    ]
    return "\n".join(out) + "\n"


def plot_breakeven(rows: Sequence, path: Path) -> None:
    """Two panels per task: headroom captured and break-even seconds vs Dir-3, one line per (N, k)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tasks = sorted({r.task for r in rows})
    fig, axes = plt.subplots(2, len(tasks), figsize=(5 * len(tasks), 7), squeeze=False)
    for col, t in enumerate(tasks):
        for key in sorted({(r.n_candidates, r.k) for r in rows if r.task == t}):
            sel = sorted((r for r in rows if r.task == t and (r.n_candidates, r.k) == key), key=lambda r: r.dir3)
            xs = [r.dir3 for r in sel]
            axes[0][col].plot(xs, [r.headroom for r in sel], marker="o", label=f"N={key[0]} k={key[1]}")
            axes[1][col].plot(
                xs, [r.breakeven_s if math.isfinite(r.breakeven_s) else float("nan") for r in sel], marker="o"
            )
        axes[0][col].set_title(t)
        axes[0][col].set_ylabel("headroom captured")
        axes[1][col].set_ylabel("break-even verification (s)")
        axes[1][col].set_yscale("log")
        axes[1][col].set_xlabel("critic Dir-3")
        for x in (0.466, 0.633):  # the prompted and the trained critic of the paper
            for ax in (axes[0][col], axes[1][col]):
                ax.axvline(x, color="grey", linestyle=":", linewidth=1)
        axes[0][col].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["breakeven_command", "breakeven_markdown", "plot_breakeven"]
