"""Framework overhead, side by side: verifyless, OpenEvolve and ShinkaEvolve on an instant workload.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/overhead.py [--nodes N] [--quick] [--eval-seconds S] [--frameworks a,b,c]

One loopback OpenAI-compatible server (``verifyless.model.testserver``,
replies from ``bench/_loopback.InstantResponder``) serves every framework in
the same run, and every framework loads the same OpenEvolve-format folder,
``bench/tasks/instant`` (a fresh copy each), whose evaluator returns at once
or after ``--eval-seconds``. Each framework runs in its own subprocess, one
after the other: verifyless with this interpreter, OpenEvolve and ShinkaEvolve
with ``.bench-venv/bin/python`` (see docs/benchmarks.md for how it is made);
a framework that is not installed, or fails, gets a row saying why.

Printed as a markdown table per framework:

* nodes verified -- programs that went through the evaluator, baseline included;
* wall s -- the framework's run call, timed inside its subprocess (imports and
  set-up are reported separately, as "set-up s");
* verified nodes/s -- nodes / wall;
* sandbox start-up s/verif -- verifyless: mean ``Verification.overhead_seconds``
  (workspace, isolation, teardown; the interpreter's own start is inside the
  run); ShinkaEvolve: mean ``evaluation_seconds`` of its eval job minus the
  evaluator's own time (it starts ``python evaluate.py`` per program);
  OpenEvolve has no sandbox (it calls ``evaluate()`` in a worker thread);
* verif. latency - evaluator s -- what one verification costs the framework
  beyond the evaluator's own time, as the framework observes it;
* framework share -- ``1 - (evaluator time + LLM server time) / wall``, where
  evaluator time is the evaluator's self-measured ``eval_seconds`` summed over
  nodes and LLM server time is the server's time spent producing replies.

A bare ``python -c pass`` subprocess (this interpreter) is timed in the same
run as a floor for any design that starts a process per verification.

The ``--arm NAME`` mode is internal: the parent runs each framework through it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "bench" / "tasks" / "instant"
BENCH_PYTHON = ROOT / ".bench-venv" / "bin" / "python"
FRAMEWORKS = ("verifyless", "verifyless-screened", "openevolve", "shinka")
ARM_TIMEOUT_S = 300
DELAY_FILE = "eval_seconds.txt"


# ============================================================================ parent side


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.arm:
        return _run_arm(args)
    if args.sandbox:
        print(sandbox_table(args.repeats, args.compare_src))
        return 0
    frameworks = [f.strip() for f in (args.frameworks or ",".join(FRAMEWORKS)).split(",") if f.strip()]
    unknown = set(frameworks) - set(FRAMEWORKS)
    if unknown:
        raise SystemExit(f"unknown framework(s) {sorted(unknown)}; choose from {', '.join(FRAMEWORKS)}")
    if args.quick:
        frameworks = [f for f in frameworks if f == "verifyless"] or ["verifyless"]
    nodes = args.nodes or (6 if args.quick else 30)
    try:
        from _loopback import start_server
    except ImportError as exc:
        raise SystemExit(
            f"cannot import verifyless ({exc}); run this script with the project's "
            ".venv/bin/python from the repository root"
        ) from None

    baseline = bare_python_start(sys.executable, repeats=5 if args.quick else 20)
    server, responder = start_server(TASK)
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="verifyless-overhead-") as tmp:
            for name in frameworks:
                rows.append(_measure(name, server.base_url, responder, Path(tmp) / name, nodes, args.eval_seconds))
    finally:
        server.stop()
    print(render(rows, baseline, nodes=nodes, eval_seconds=args.eval_seconds))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"rows": rows, "bare_python": baseline, "nodes": nodes, "eval_seconds": args.eval_seconds}, indent=2
            )
        )
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Time verifyless, OpenEvolve and ShinkaEvolve on an instant workload.")
    p.add_argument("--nodes", type=int, default=None, help="verified nodes per framework (default 30; 6 with --quick)")
    p.add_argument("--quick", action="store_true", help="verifyless only, few nodes (the smoke test)")
    p.add_argument("--eval-seconds", type=float, default=0.0, help="evaluator sleep per verification (default 0)")
    p.add_argument("--frameworks", default=None, help=f"comma list from {', '.join(FRAMEWORKS)} (default: all)")
    p.add_argument("--json", default=None, help="also write the raw measurements to this file")
    p.add_argument(
        "--sandbox",
        action="store_true",
        help="only time sandbox start-up per isolation level against a bare subprocess",
    )
    p.add_argument("--repeats", type=int, default=20, help="runs per row in --sandbox mode (default 20)")
    p.add_argument(
        "--compare-src",
        default=None,
        help="--sandbox mode: also time the LocalSandbox of another source tree's src/ folder "
        "(e.g. an older commit unpacked with git archive), at its default level",
    )
    p.add_argument("--arm", default=None, help=argparse.SUPPRESS)
    p.add_argument("--base-url", default=None, help=argparse.SUPPRESS)
    p.add_argument("--task-dir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--work-dir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    return p


def sandbox_table(repeats: int, compare_src: str | None = None) -> str:
    """Markdown table: ``python -c pass`` bare and through ``LocalSandbox`` at each level this host allows.

    ``compare_src`` adds a row for the ``LocalSandbox`` of another tree's ``src/`` (its
    ``verifyless/sandbox/local.py`` loaded under another module name, with its own ``_boot.py``).

    Rows run interleaved (one run of each row per round), so load changes on a
    shared machine hit every row alike. *start-up* is ``ExecResult.overhead_seconds``
    (everything outside the candidate's own run); *total* is the caller's wall time. The bootstrap row
    starts ``python -I -S`` with ``_boot.py``'s imports and nothing else: the part of every level's
    start-up that a pre-started (warm) bootstrap would take off the critical path.
    """
    sys.path.insert(0, str(ROOT / "src"))
    from verifyless.sandbox.local import LocalSandbox, _probe
    from verifyless.task.base import Limits

    limits = Limits(wall_seconds=30, memory_mb=1024)
    levels = [
        lvl
        for lvl in ("namespace", "userns", "process")
        if lvl == "process" or (_probe(lvl) and (lvl != "namespace" or os.geteuid() == 0))
    ]
    sandboxes: dict[str, Any] = {lvl: LocalSandbox(isolation=lvl) for lvl in levels}
    if compare_src:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "compared_local", Path(compare_src, "verifyless", "sandbox", "local.py")
        )
        assert spec is not None and spec.loader is not None
        compared = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(compared)
        sandboxes[f"{compare_src} (auto)"] = compared.LocalSandbox()
    levels = list(sandboxes)
    boot = "bootstrap interpreter alone (`-I -S`, its imports)"  # what a warm, pre-started bootstrap would save
    totals: dict[str, list[float]] = {"bare subprocess": [], boot: [], **{lvl: [] for lvl in levels}}
    overheads: dict[str, list[float]] = {lvl: [] for lvl in levels}
    with tempfile.TemporaryDirectory(prefix="verifyless-bench-") as scratch:
        for i in range(repeats):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            totals["bare subprocess"].append(time.perf_counter() - started)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-I", "-S", "-c", BOOT_IMPORTS], check=True)
            totals[boot].append(time.perf_counter() - started)
            for lvl, sandbox in sandboxes.items():
                ws = Path(scratch, f"{lvl}-{i}")
                ws.mkdir()
                started = time.perf_counter()
                result = sandbox.run([sys.executable, "-c", "pass"], ws, limits)
                totals[lvl].append(time.perf_counter() - started)
                overheads[lvl].append(result.overhead_seconds)
    lines = [
        f"Sandbox start-up, `python -c pass`, {repeats} interleaved runs per row (seconds)",
        "",
        "| row | start-up median | start-up p90 | total median | total min |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row, values in totals.items():
        over = overheads.get(row)
        cells = [f"{statistics.median(over):.3f}", f"{_p90(over):.3f}"] if over else ["-", "-"]
        lines.append(f"| {row} | {' | '.join(cells)} | {statistics.median(values):.3f} | {min(values):.3f} |")
    return "\n".join(lines)


BOOT_IMPORTS = "import ctypes, json, os, resource, signal, sys, time; ctypes.CDLL(None, use_errno=True)"


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def bare_python_start(python: str, repeats: int) -> dict[str, float]:
    """Median and minimum seconds to start and end ``python -c pass`` as a subprocess."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([python, "-c", "pass"], check=True)
        times.append(time.perf_counter() - started)
    return {"median_s": statistics.median(times), "min_s": min(times), "repeats": repeats}


def _measure(name: str, base_url: str, responder: Any, work: Path, nodes: int, eval_seconds: float) -> dict[str, Any]:
    """Run one framework in its own subprocess against the shared server; one table row."""
    work.mkdir(parents=True)
    task_dir = work / "instant"
    shutil.copytree(TASK, task_dir, ignore=shutil.ignore_patterns("__pycache__", DELAY_FILE))
    if eval_seconds > 0:
        (task_dir / DELAY_FILE).write_text(f"{eval_seconds}\n")
    python = sys.executable if name.startswith("verifyless") else str(BENCH_PYTHON)
    row: dict[str, Any] = {"framework": name}
    if not Path(python).exists():
        return {**row, "error": f"{python} not found: create .bench-venv (see docs/benchmarks.md)"}
    out = work / "result.json"
    busy0, kinds0 = responder.snapshot()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "TQDM_DISABLE": "1",
        "PYTHONUNBUFFERED": "1",
        "BENCH_LLM_KEY": "bench-key",
    }
    cmd = [
        python,
        str(Path(__file__).resolve()),
        "--arm",
        name,
        "--base-url",
        base_url,
        "--task-dir",
        str(task_dir),
        "--work-dir",
        str(work),
        "--out",
        str(out),
        "--nodes",
        str(nodes),
    ]
    log = work / "arm.log"
    try:
        with open(log, "wb") as fh:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=work, timeout=ARM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {**row, "error": f"timed out after {ARM_TIMEOUT_S} s; log tail: {_tail(log)}"}
    busy1, kinds1 = responder.snapshot()
    if proc.returncode != 0 or not out.exists():
        return {**row, "error": f"exit {proc.returncode}; log tail: {_tail(log)}"}
    result = json.loads(out.read_text())
    result["llm_server_s"] = busy1 - busy0
    result["llm_replies"] = {k: v - kinds0.get(k, 0) for k, v in kinds1.items() if v - kinds0.get(k, 0)}
    return {**row, **result}


def _tail(path: Path, chars: int = 600) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return " ".join(text[-chars:].split())


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def render(rows: list[dict[str, Any]], baseline: dict[str, float], *, nodes: int, eval_seconds: float) -> str:
    """The markdown table (one row per framework) and the bare-subprocess baseline line."""
    head = (
        "| framework | nodes verified | wall s | verified nodes/s | sandbox start-up s/verif "
        "| verif. latency - evaluator s | framework share | set-up s | LLM replies |"
    )
    lines = [
        f"Instant scripted LLM; {nodes} nodes per framework; evaluator sleep {eval_seconds:g} s.",
        "",
        head,
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['framework']} | - | - | - | - | - | - | - | not run: {r['error'][:300]} |")
            continue
        wall, n = r["wall_s"], r["nodes"]
        share = 1.0 - (r["eval_s"] + r["llm_server_s"]) / wall if wall > 0 else None
        startup = _mean(r.get("sandbox_s", []))
        latency = _mean(r.get("latency_minus_eval_s", []))
        replies = ", ".join(f"{k} {v}" for k, v in sorted(r.get("llm_replies", {}).items()))
        lines.append(
            f"| {r['framework']} | {n} | {wall:.2f} | {n / wall:.2f} | "
            f"{'n/a (no sandbox)' if startup is None else f'{startup:.3f}'} | "
            f"{'-' if latency is None else f'{latency:.3f}'} | "
            f"{'-' if share is None else f'{share:.1%}'} | {r.get('setup_s', 0):.2f} | {replies} |"
        )
    lines += [
        "",
        f"Bare `python -c pass` subprocess ({platform.python_version()}): median "
        f"{baseline['median_s']:.3f} s, min {baseline['min_s']:.3f} s over {baseline['repeats']} runs.",
    ]
    for r in rows:
        for note in r.get("notes", []):
            lines.append(f"- {r['framework']}: {note}")
    return "\n".join(lines)


# ============================================================================ arms (child side)


def _run_arm(args: argparse.Namespace) -> int:
    arms = {
        "verifyless": _arm_verifyless,
        "verifyless-screened": _arm_verifyless_screened,
        "openevolve": _arm_openevolve,
        "shinka": _arm_shinka,
    }
    result = arms[args.arm](args)
    Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


def _arm_verifyless(args: argparse.Namespace, screened: bool = False) -> dict[str, Any]:
    """verifyless: LLM roles on the loopback server, the shipped default strategy (mcgs), local sandbox.

    Unscreened: one candidate per expansion and the random screener, so every
    child made is verified (the same work per node as the other frameworks).
    Screened: four candidates per expansion ranked by the LLM critic, one verified.
    """
    import asyncio

    started = time.perf_counter()
    from verifyless.config import load_config
    from verifyless.store import RunStore
    from verifyless.wiring import build_engine

    work = Path(args.work_dir)
    # The 'env' spec (VERIFYLESS_BASE_URL / _MODEL / _API_KEY): a mapping under roles.models is
    # documented on config.Roles but model.config.parse_spec accepts only strings and ModelConfig.
    os.environ.update(
        {"VERIFYLESS_BASE_URL": args.base_url, "VERIFYLESS_MODEL": "scripted", "VERIFYLESS_API_KEY": "bench-key"}
    )
    overrides: dict[str, Any] = {
        "task": args.task_dir,
        "budget.verifications": args.nodes,
        "store": str(work / "runs.db"),
        "roles.kind": "llm",
        "roles.models.default": "env",
    }
    if screened:
        overrides.update({"engine.candidates": 4, "screener.name": "critic"})
    else:
        # No memory: its MiniLM encoder is a one-off model load the other arms have no counterpart for
        # (ShinkaEvolve runs here without embeddings too); the screened arm keeps the shipped default.
        overrides.update({"engine.candidates": 1, "screener.name": "random", "engine.memory": False})
    cfg = load_config(values=overrides)
    with RunStore(cfg.store) as store:
        engine = build_engine(cfg, store)
        setup = time.perf_counter() - started
        try:
            run_started = time.perf_counter()
            result = asyncio.run(engine.run())
            wall = time.perf_counter() - run_started
        finally:
            engine.executor.close()
        from verifyless.events import LlmCalled  # after the set-up clock: not a cost of the run
        from verifyless.testing import verification_events

        verifications = [e.record.verification for e in verification_events(store, result.run_id)]
        calls = sum(1 for _ in store.events(result.run_id, LlmCalled))
        isolation = getattr(getattr(engine.executor, "sandbox", None), "isolation", "?")
    evals = [float(v.metrics.get("eval_seconds", 0.0)) for v in verifications]
    seconds = [v.seconds for v in verifications]
    statuses = sorted({v.status.value for v in verifications})
    return {
        "nodes": len(verifications),
        "wall_s": wall,
        "setup_s": setup,
        "eval_s": sum(evals),
        "sandbox_s": [v.overhead_seconds for v in verifications],
        "latency_minus_eval_s": [s - e for s, e in zip(seconds, evals, strict=False)],
        "notes": [
            f"{'4 candidates/expansion, critic screener' if screened else '1 candidate/expansion, random screener'}"
            f", memory {'on' if engine.memory is not None else 'off'}"
            f", strategy {cfg.strategy.name}, sandbox isolation {isolation}, {calls} LLM calls, "
            f"statuses {statuses}, stopped: {result.stopped}"
        ],
    }


def _arm_verifyless_screened(args: argparse.Namespace) -> dict[str, Any]:
    return _arm_verifyless(args, screened=True)


def _arm_openevolve(args: argparse.Namespace) -> dict[str, Any]:
    """OpenEvolve with its defaults except: the loopback model, one worker, no cascade, checkpoints off.

    ``Evaluator.evaluate_program`` is wrapped (before the worker pool forks) to
    log how long each evaluation took as OpenEvolve sees it.
    """
    import asyncio
    import importlib.metadata

    started = time.perf_counter()
    import openevolve.evaluator as oe_evaluator
    from openevolve.config import Config
    from openevolve.controller import OpenEvolve

    work, task = Path(args.work_dir), Path(args.task_dir)
    timing_log = work / "oe_eval_times.jsonl"
    original = oe_evaluator.Evaluator.evaluate_program

    async def timed(self, program_code, program_id="", *a, **kw):
        t0 = time.perf_counter()
        out = await original(self, program_code, program_id, *a, **kw)
        with open(timing_log, "a") as fh:  # appends of one short line are atomic across workers
            fh.write(
                json.dumps(
                    {"seconds": time.perf_counter() - t0, "eval_seconds": float((out or {}).get("eval_seconds", 0.0))}
                )
                + "\n"
            )
        return out

    oe_evaluator.Evaluator.evaluate_program = timed
    config = Config.from_dict(
        {
            "max_iterations": args.nodes - 1,  # plus the initial program = nodes evaluations
            "checkpoint_interval": 10**6,
            "log_level": "WARNING",
            "random_seed": 0,
            "llm": {
                "api_base": args.base_url,
                "api_key": "bench-key",
                "models": [{"name": "scripted", "weight": 1.0}],
                "timeout": 60,
                "retries": 0,
            },
            "evaluator": {"cascade_evaluation": False, "parallel_evaluations": 1, "timeout": 60, "max_retries": 0},
        }
    )
    controller = OpenEvolve(
        initial_program_path=str(task / "initial_program.py"),
        evaluation_file=str(task / "evaluator.py"),
        config=config,
        output_dir=str(work / "oe_out"),
    )
    setup = time.perf_counter() - started
    run_started = time.perf_counter()
    asyncio.run(controller.run(iterations=args.nodes - 1))
    wall = time.perf_counter() - run_started
    records = [json.loads(line) for line in timing_log.read_text().splitlines()] if timing_log.exists() else []
    return {
        "nodes": len(records),
        "wall_s": wall,
        "setup_s": setup,
        "eval_s": sum(r["eval_seconds"] for r in records),
        "latency_minus_eval_s": [r["seconds"] - r["eval_seconds"] for r in records],
        "notes": [
            f"openevolve {importlib.metadata.version('openevolve')}, {len(controller.database.programs)} programs "
            "in its database, evaluate() runs in-process in one worker (no isolation)"
        ],
    }


def _arm_shinka(args: argparse.Namespace) -> dict[str, Any]:
    """ShinkaEvolve with its defaults except: the loopback model, one evaluation job, no embeddings/meta/novelty LLMs."""
    import importlib.metadata

    started = time.perf_counter()
    from shinka.core import EvolutionConfig, ShinkaEvolveRunner
    from shinka.database import DatabaseConfig
    from shinka.launch import LocalJobConfig

    work, task = Path(args.work_dir), Path(args.task_dir)
    results = work / "shinka_results"
    evo = EvolutionConfig(
        num_generations=args.nodes,  # generation 0 is the initial program
        llm_models=[f"local/scripted@{args.base_url}?api_key_env=BENCH_LLM_KEY"],
        llm_dynamic_selection=None,
        embedding_model=None,
        meta_rec_interval=None,
        init_program_path=str(task / "initial_program.py"),
        results_dir=str(results),
    )
    job = LocalJobConfig(eval_program_path=str(task / "evaluate.py"), python_executable=sys.executable)
    db = DatabaseConfig(db_path=str(results / "programs.sqlite"))
    runner = ShinkaEvolveRunner(evo_config=evo, job_config=job, db_config=db, verbose=False, max_evaluation_jobs=1)
    setup = time.perf_counter() - started
    run_started = time.perf_counter()
    runner.run()
    wall = time.perf_counter() - run_started
    rows = _shinka_rows(results)
    evals, latency, sandbox = [], [], []
    for metadata, private in rows:
        e = float(private.get("eval_seconds", 0.0))
        evals.append(e)
        if "evaluation_seconds" in metadata:
            latency.append(float(metadata["evaluation_seconds"]) - e)
            sandbox.append(float(metadata["evaluation_seconds"]) - e)
    return {
        "nodes": len(rows),
        "wall_s": wall,
        "setup_s": setup,
        "eval_s": sum(evals),
        "sandbox_s": sandbox,
        "latency_minus_eval_s": latency,
        "notes": [
            f"shinka-evolve {importlib.metadata.version('shinka-evolve')}, one `python evaluate.py` "
            "subprocess per program (no isolation beyond the process)"
        ],
    }


def _shinka_rows(results: Path) -> list[tuple[dict, dict]]:
    """(metadata, private_metrics) of every evaluated program in ShinkaEvolve's SQLite database."""
    import sqlite3

    found = sorted(results.rglob("*.sqlite")) + sorted(results.rglob("*.db"))
    for path in found:
        con = sqlite3.connect(path)
        try:
            cols = {r[1] for r in con.execute("PRAGMA table_info(programs)")}
            if not cols:
                continue
            meta_col = "metadata" if "metadata" in cols else None
            priv_col = "private_metrics" if "private_metrics" in cols else None
            query = f"SELECT {meta_col or 'NULL'}, {priv_col or 'NULL'} FROM programs"
            rows = [(json.loads(m or "{}"), json.loads(p or "{}")) for m, p in con.execute(query)]
            # The initial program is copied onto every island; a copy was not evaluated again.
            return [(m, p) for m, p in rows if not m.get("_is_island_copy")]
        finally:
            con.close()
    return []


if __name__ == "__main__":
    sys.exit(main())
