"""A real open code model drives the product (issue 53): per-role parse shares, then arms side by side.

Usage (from the repository root, with the project's virtualenv; the model is served by ``verifyless serve``,
whose weights and engine this script prepares on first use)::

    .venv/bin/python bench/real_model.py roles [--model qwen2.5-coder-0.5b] [--budget 3] [--candidates 2]
    .venv/bin/python bench/real_model.py arms  [--model ...] [--tasks diabetes,breast_cancer] [--budget 12]
                                               [--candidates 4] [--seeds 3] [--arms random,critic,...]
                                               [--k 4] [--children model|space]
    .venv/bin/python bench/real_model.py table STORE.db ...   # the roles table over every run of stores

Both drive the product's own path: ``wiring.build_engine`` on a configuration a user would write, every LLM role
on one ``openai`` endpoint (the ``env`` spec with the settings ``verifyless serve`` prints), local sandboxed
verifications, one store per bench in a temporary folder (``--keep DIR`` keeps it).

* ``roles``: short runs, one per screener family, so every LLM role answers the real model: the brief,
  proposer, implementer (``full`` and ``diff``), summarizer, pointwise critic (k votes), label-probability
  critic (its probe through ``/v1/completions``), pairwise tournament, arbiter over two critics, agentic judge
  (pilot agent, feedback and final pick) and the novelty judge. A run the product stops (a judge that never
  follows its format, exit 8) is reported in one line and the others go on. Prints, per role: calls, replies parsed on the
  first try / after a format reminder / never, tokens in and out, seconds per call.
* ``arms``: the same budget per arm on each task and seed: ``random`` (N candidates, a random one verified),
  ``critic`` (the real model as a k=4 pointwise critic), ``default-cold`` (the default screener, adaptive around
  critic-rm, on a store with no earlier run), ``default-warm`` (the same, warm-started from an earlier real-model
  run of the task in the store), ``single`` (one candidate per round, no screening: the OpenEvolve shape).
  ``--children space`` makes every arm's children from the task's idea space, so the model is only the
  critic: the CPU-sized variant (a CPU-served 1.5B model takes one to three minutes per call).
  Prints the best validation score at 1/3, 2/3 and all of the budget, the verifications each arm needed to
  reach random's final (same task and seed), the critic's Dir-3 and pairwise accuracy on the children it
  screened whose outcome was paid for, LLM calls, tokens, wall and evaluator seconds.

Numbers come from whatever the model does on this machine: a CPU-served 0.5B model is slow (minutes per
round) and weak; report what the table shows.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _scripted import run_timed
from verifyless.config import load_config
from verifyless.errors import VerifylessError
from verifyless.events import LlmCalled, ReplyParsed, Screened, Verified
from verifyless.metrics.critic import dir3_accuracy
from verifyless.model import served
from verifyless.node import Status
from verifyless.offline.compare import curve_from_store, reach
from verifyless.store import RunStore

# The child-making roles run on the model in `children` and `children-diff`; the screeners' runs make their
# children from the task's idea space (no LLM), so every screener sees real candidates even where the model
# could not implement an idea (the 0.5B model mostly could not), and only the screening is the model's.
SPACE = {"roles": {"kind": "space", "models": {"default": "env"}}}
ROLE_RUNS: dict[str, dict[str, Any]] = {
    "children": {"screener": {"name": "critic", "options": {"k": 2}}},
    "children-diff": {"screener": {"name": "random", "options": {}}, "roles": {"implement_mode": "diff"}},
    "critic": {**SPACE, "screener": {"name": "critic", "options": {"k": 2}}},
    "critic-probs": {**SPACE, "screener": {"name": "critic-probs", "options": {}}},
    "tournament": {**SPACE, "screener": {"name": "tournament", "options": {}}},
    "novelty": {
        **SPACE,
        "screener": {"name": "random", "options": {}},
        "novelty": {"enabled": True, "judge": True, "embedder": "hashing", "threshold": 0.9999, "judge_lower": 0.0},
    },
    "arbiter": {
        **SPACE,
        "screener": {
            "name": "arbiter",
            "options": {"members": ["default", "default"], "member": "critic", "member_options": {"k": 1}},
        },
    },
    "agentic": {**SPACE, "screener": {"name": "agentic", "options": {"max_pilots": 1}}},
}
ARMS: dict[str, dict[str, Any]] = {
    "random": {"screener": {"name": "random", "options": {}}},
    "critic": {"screener": {"name": "critic", "options": {}}},  # k from --k
    "default-cold": {},
    "default-warm": {},
    "single": {"screener": {"name": "random", "options": {}}, "engine": {"candidates": 1}},
}
PARSE_OUTCOMES = ("first", "reminder", "never")
ROLE_HEADER = [
    "role",
    "calls",
    "parsed first",
    "after reminder",
    "never",
    "parsed",
    "tokens in",
    "tokens out",
    "s/call",
]


@contextlib.contextmanager
def endpoint(name: str) -> Iterator[dict[str, str]]:
    """Serve ``name`` (preparing it once) and set the ``env`` spec's variables for the block."""
    with served.serving(name, say=print) as server:
        saved = dict(os.environ)
        os.environ.update(server.env())
        try:
            yield server.env()
        finally:
            os.environ.clear()
            os.environ.update(saved)


def config(task: str, store: Path, seed: int, budget: int, candidates: int, extra: dict[str, Any]) -> Any:
    """A user's run configuration: LLM roles on the served model, greedy search improving the baseline from the
    first round (no drafts: a 0.5B model asked for a fresh solution copied the baseline unchanged), ``extra``
    merged over it."""
    values: dict[str, Any] = {
        "task": task,
        "seed": seed,
        "store": str(store),
        "roles.kind": "llm",
        "strategy.name": "greedy",
        "strategy.options": {"num_drafts": 0},  # improve from the start: a fresh draft is beyond a 0.5B model
        "budget.verifications": budget,
        "engine.candidates": candidates,
    }
    for section, settings in extra.items():
        values |= {f"{section}.{key}": value for key, value in settings.items()}
    return load_config(values=values)


def run_one(cfg: Any) -> tuple[str, float]:
    """Run ``cfg`` through the product's engine to its end; its run id and wall seconds."""
    with RunStore(Path(cfg.store)) as store:
        result, wall = run_timed(cfg, store)
        return result.run_id, wall


def role_rows(runs: list[tuple[RunStore, str]]) -> list[list[str]]:
    """One table row per role over ``runs`` (store, run id): calls, parse outcomes, tokens, seconds per call."""
    calls: dict[str, list[float]] = {}
    parsed: dict[str, dict[str, int]] = {}
    for store, run in runs:
        for ev in store.events(run, LlmCalled):
            r = ev.record
            acc = calls.setdefault(r.role, [0, 0, 0, 0.0])
            for i, v in enumerate((1, r.prompt_tokens, r.completion_tokens, r.latency_s)):
                acc[i] += v
        for ev in store.events(run, ReplyParsed):
            counts = parsed.setdefault(ev.record.role, dict.fromkeys(PARSE_OUTCOMES, 0))
            counts[ev.record.outcome] += 1
    rows = []
    for role in sorted(set(calls) | set(parsed)):
        n, tin, tout, secs = calls.get(role, [0, 0, 0, 0.0])
        p = parsed.get(role, {})
        total = sum(p.values())
        share = f"{100 * (p.get('first', 0) + p.get('reminder', 0)) / total:.0f} %" if total else "-"
        rows.append(
            [
                role,
                str(int(n)),
                *(str(p.get(k, 0)) for k in PARSE_OUTCOMES),
                share,
                str(int(tin)),
                str(int(tout)),
                f"{secs / n:.0f}" if n else "-",
            ]
        )
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def bench_roles(args: argparse.Namespace, folder: Path) -> None:
    store_path = folder / f"roles-{args.only.replace(',', '-') or 'all'}.db"
    runs = []
    with endpoint(args.model):
        for name in args.only.split(",") if args.only else ROLE_RUNS:  # in the order asked for
            extra = ROLE_RUNS[name]
            cfg = config(args.task, store_path, 0, args.budget, args.candidates, extra)
            try:
                run_id, wall = run_one(cfg)
            except VerifylessError as exc:  # e.g. a judge that never follows its format stops its run (exit 8)
                print(f"{name}: stopped: {exc}", flush=True)
                continue
            runs.append(run_id)
            print(f"{name}: run {run_id} in {wall:.0f} s", flush=True)
    with RunStore(store_path) as store:  # a stopped run's replies count too
        runs = [r.run_id for r in store.runs()]
    with RunStore(store_path) as store:
        rows = role_rows([(store, run) for run in runs])
    print(
        f"\nEvery LLM role on {args.model} (task {args.task}, {len(runs)} runs, budget {args.budget}, "
        f"N = {args.candidates}):\n"
    )
    print(table(ROLE_HEADER, rows))


def critic_accuracy(store: RunStore, run: str) -> tuple[float | None, float | None, int]:
    """Dir-3 and pairwise accuracy of the run's screener on children whose outcome was paid for."""
    verified = {
        e.node_id: e.record.verification
        for e in store.events(run, Verified)
        if e.record.verification.fitness is not None
    }
    parent_of = {n.id: n.parent_id for n in store.nodes(run)}
    pred, true, pairs, agree = [], [], 0, 0
    for ev in store.events(run, Screened):
        s = ev.record.screening
        paid = [c for c in s.ranking if c in verified and parent_of.get(c) in verified]
        for c in paid:
            label = (s.evidence.get(c).detail or {}).get("label") if s.evidence.get(c) else None
            delta = verified[c].fitness - verified[parent_of[c]].fitness  # type: ignore[operator]
            pred.append(label)
            true.append("improve" if delta > 1e-9 else "lose" if delta < -1e-9 else "tie")
        for a, b in itertools.combinations(paid, 2):  # ranking order: a above b
            fa, fb = verified[a].fitness, verified[b].fitness
            if fa != fb:
                pairs += 1
                agree += int(fa > fb)  # type: ignore[operator]
    dir3 = dir3_accuracy(pred, true) if pred and any(p is not None for p in pred) else None
    return dir3, (agree / pairs if pairs else None), len(true)


def arm_extra(args: argparse.Namespace, arm: str) -> dict[str, Any]:
    """The configuration ``arm`` merges over the user's: its screener (the critic with ``--k`` votes) and, with
    ``--children space``, children made from the task's idea space so that the model is only the screener."""
    extra = {section: dict(settings) for section, settings in ARMS[arm].items()}
    if arm == "critic":
        extra["screener"]["options"] = {"k": args.k}
    if args.children == "space":
        extra |= SPACE
    return extra


def bench_arms(args: argparse.Namespace, folder: Path) -> None:
    arms = args.arms.split(",")
    rows = []
    with endpoint(args.model):
        for task, seed in itertools.product(args.tasks.split(","), range(args.seeds)):
            results: dict[str, tuple[RunStore, str, float]] = {}
            for arm in arms:
                store_path = folder / f"{task}-{seed}-{'warm' if arm == 'default-warm' else arm}.db"
                if arm == "default-warm":  # an earlier run of the task in the same store, its children as the arms'
                    run_one(
                        config(task, store_path, 1000 + seed, args.budget, args.candidates, arm_extra(args, "random"))
                    )
                cfg = config(task, store_path, seed, args.budget, args.candidates, arm_extra(args, arm))
                run_id, wall = run_one(cfg)
                results[arm] = (RunStore(store_path), run_id, wall)
                print(f"{task} seed {seed} {arm}: {wall:.0f} s", flush=True)
            base = curve_from_store(*results["random"][:2]) if "random" in results else None
            for arm, (store, run_id, wall) in results.items():
                curve = curve_from_store(store, run_id)
                marks = [max(1, round(args.budget * f)) for f in (1 / 3, 2 / 3, 1)]
                best = [curve.best[min(m, len(curve.best)) - 1] if len(curve.best) else math.nan for m in marks]
                to_random = reach(curve, base.final).verifications if base is not None else None
                dir3, pair, n = critic_accuracy(store, run_id)
                b = store.budget(run_id)
                ok = sum(1 for e in store.events(run_id, Verified) if e.record.verification.status is Status.OK)
                rows.append(
                    [
                        task,
                        str(seed),
                        arm,
                        *(f"{x:.4g}" for x in best),
                        str(to_random or "never"),
                        "-" if dir3 is None else f"{100 * dir3:.0f} ({n})",
                        "-" if pair is None else f"{100 * pair:.0f}",
                        str(ok),
                        str(sum(1 for _ in store.events(run_id, LlmCalled))),
                        str(b.tokens_in + b.tokens_out),
                        f"{wall:.0f}",
                        f"{b.evaluator_seconds:.0f}",
                    ]
                )
                store.close()
    marks = [max(1, round(args.budget * f)) for f in (1 / 3, 2 / 3, 1)]
    header = [
        "task",
        "seed",
        "arm",
        *(f"best@{m}" for m in marks),
        "to random's final",
        "Dir-3 % (n)",
        "pairwise %",
        "verified ok",
        "LLM calls",
        "tokens",
        "wall s",
        "evaluator s",
    ]
    made = "the task's idea space" if args.children == "space" else "the model"
    print(
        f"\nArms on {args.model}, budget {args.budget}, N = {args.candidates}, critic k = {args.k}, children from {made}:\n"
    )
    print(table(header, rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["roles", "arms", "table"])
    parser.add_argument("stores", nargs="*", type=Path, help="table: the stores whose runs to tabulate")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", choices=sorted(served.CATALOG))
    parser.add_argument("--task", default="diabetes", help="roles: the task")
    parser.add_argument("--tasks", default="diabetes,breast_cancer", help="arms: comma-separated tasks")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"arms: comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--budget", type=int, default=None, help="verifications per run (roles: 3, arms: 12)")
    parser.add_argument("--candidates", type=int, default=None, help="N per expansion (roles: 2, arms: 4)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--k", type=int, default=4, help="arms: the critic arm's votes per candidate")
    parser.add_argument(
        "--children",
        choices=["model", "space"],
        default="model",
        help="arms: who makes the children (space: the task's idea space, so the model only screens; a CPU budget)",
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep the stores in this folder")
    parser.add_argument("--only", default="", help=f"roles: comma-separated runs of {', '.join(ROLE_RUNS)}")
    args = parser.parse_args()
    if args.what == "table":  # the per-role table over every run of stores written earlier
        with contextlib.ExitStack() as opened:
            stores = [opened.enter_context(RunStore(path)) for path in args.stores]
            print(table(ROLE_HEADER, role_rows([(st, r.run_id) for st in stores for r in st.runs()])))
        return
    args.budget = args.budget or (3 if args.what == "roles" else 12)
    args.candidates = args.candidates or (2 if args.what == "roles" else 4)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        (bench_roles if args.what == "roles" else bench_arms)(args, folder)


if __name__ == "__main__":
    main()
