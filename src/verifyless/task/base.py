"""The in-memory Task: what every other module may rely on.

Loaders (``verifyless.task.load_task``) turn a native ``task.yaml`` folder or
an OpenEvolve folder into this frozen object. Paths are absolute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verifyless.program import Band


@dataclass(frozen=True)
class Limits:
    """Per-verification resource limits: of the untrusted step, and ``score_seconds`` of the trusted scorer."""

    wall_seconds: float = 60.0
    memory_mb: int = 2048  # resident host memory of the whole run (a memory cgroup, or the watchdog)
    cpu_seconds: float | None = None  # default: 2 x wall_seconds
    processes: int = 64  # RLIMIT_NPROC for the sandbox user
    output_bytes: int = 1_000_000  # cap on captured stdout+stderr each
    file_size_mb: int = 256  # RLIMIT_FSIZE: largest single file it may write
    open_files: int = 256  # RLIMIT_NOFILE
    threads: int = 1  # OMP/MKL/OPENBLAS/torch thread variables
    workspace_mb: int = 512  # total bytes the workspace may hold afterwards
    gpus: int = 0  # GPUs each verification holds (0: a CPU task, which sees no GPU)
    score_seconds: float | None = None  # the trusted scorer's time limit, any scorer kind; default max(60, wall)

    @property
    def scorer_seconds(self) -> float:
        """How long the trusted scorer may take: ``score_seconds``, else the larger of 60 s and ``wall_seconds``."""
        return self.score_seconds if self.score_seconds is not None else max(60.0, self.wall_seconds)


@dataclass(frozen=True)
class Metric:
    """The main metric and its direction; bounds are for validation of values."""

    name: str
    direction: Literal["minimize", "maximize"]
    lower: float | None = None
    upper: float | None = None

    def orient(self, value: float) -> float:
        """Fitness: higher is better."""
        return value if self.direction == "maximize" else -value


@dataclass(frozen=True)
class Anchors:
    """Reference points for normalised scores (applied at reporting time only)."""

    floor: float | None = None  # a trivial solution's score (normalises to 0)
    reference: float | None = None  # the baseline program's score (normalises to 0.5)
    bound: float | None = None  # best achievable / optimum (normalises to 1)
    sota: float | None = None


@dataclass(frozen=True)
class IdeaOption:
    """One value an idea-space dimension can take, with the band template it renders."""

    name: str
    description: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IdeaSpace:
    """Parametrised edits for offline roles (no LLM).

    ``dimensions`` maps a dimension name (e.g. ``model``) to its options; an idea
    is the parent's assignment with one or more dimensions changed.
    ``template`` renders the band from a full assignment (``str.format``-style
    placeholders or a Jinja-free mini syntax defined by the space module).
    """

    dimensions: Mapping[str, tuple[IdeaOption, ...]]
    template: str
    baseline: Mapping[str, str]  # dimension -> option name of the baseline program
    fragments: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # slot ("model" or "model.imports") -> option name -> code; see verifyless.task.space
    descriptions: Mapping[str, str] = field(default_factory=dict)  # dimension -> what it controls


@dataclass(frozen=True)
class Ensemble:
    """How to combine the outputs of several programs into one submission (``engine/submission.py``).

    Each named file of ``files`` (in the output folder) is read from every member and combined cell by cell:
    ``combine="mean"`` averages numbers (probabilities, values), ``"vote"`` keeps the most frequent value (class
    labels; a tie goes to the best-ranked member's value). Without ``key`` a file is numbers only (comma- or
    space-separated, no header) and members are matched by position; with ``key`` it is a CSV with a header whose
    rows are matched on the ``key`` columns (which every member must hold alike) and every other column is
    combined. The trusted scorer then scores the combined folder like one candidate's.

    ``opt_in``: used only when the strategy asks for ensembles on every task that can make one
    (``strategy.options.ensemble_tasks=all``), so a rule a kind infers (a competition's ``submission.csv``) or a
    built-in task declares for the mlevolve preset changes no run that did not ask.
    """

    files: tuple[str, ...]
    combine: Literal["mean", "vote"] = "mean"
    key: tuple[str, ...] = ()
    opt_in: bool = False


@dataclass(frozen=True)
class Target:
    """The declared prediction target: its column in the public training files and the problem kind.

    ``files`` are public files (absolute paths, a subset of ``Task.public_data``) holding the column;
    data-fraction fidelity levels subsample exactly these, and the data report reads the target there.
    """

    column: str
    kind: Literal["regression", "classification"]
    files: tuple[Path, ...]


FULL_FIDELITY = "full"
# Scorer keys with these prefixes are hidden test metrics whether or not task.yaml declares them in
# metrics.test: search never sees them, and the loader refuses a validation metric named so.
HIDDEN_PREFIXES = ("test_", "hidden_")


@dataclass(frozen=True)
class FidelityLevel:
    """One cheaper way to verify a program (exactly one of the three ways is set).

    ``data_fraction``: the target files are replaced in the workspace by a seeded subsample of this
    share of their rows (stratified by the target for classification). ``knob``: a value given to the
    program as ``{fidelity}`` in the run command and as the environment variable ``Fidelity.env``.
    ``stages``: OpenEvolve only, run the first ``stages`` cascade stages.
    """

    name: str
    description: str = ""
    data_fraction: float | None = None
    seed: int = 0
    knob: str | None = None
    stages: int | None = None


@dataclass(frozen=True)
class Fidelity:
    """The task's cheaper fidelity levels, cheapest first; full fidelity is always ``"full"``.

    ``full`` is the knob's value at full fidelity (what ``{fidelity}`` in the run command becomes);
    at full fidelity the environment variable ``env`` is not set, so the program behaves as it always did.
    """

    levels: tuple[FidelityLevel, ...] = ()
    env: str = "VERIFYLESS_FIDELITY"
    full: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (*(level.name for level in self.levels), FULL_FIDELITY)

    def level(self, name: str) -> FidelityLevel | None:
        """The level called ``name``; None for full fidelity. Raises KeyError for an unknown name."""
        if name == FULL_FIDELITY:
            return None
        for level in self.levels:
            if level.name == name:
                return level
        raise KeyError(name)


@dataclass(frozen=True)
class Task:
    """A loaded, validated task.

    ``kind`` names the task kind that loaded it (``task.loader.KINDS``; contract in ``task.kind``), through which
    ``verify`` prepares and judges it; the name is stored with runs, so it stays a plain string.
    ``kind == "openevolve"``: ``evaluator`` is the folder's ``evaluator.py``
    which runs *inside* the sandbox together with the program (no hidden-data
    separation). ``kind == "native"``: ``run_command`` is the untrusted step and
    ``scorer`` the trusted step, run outside the sandbox after the candidate exits.
    ``kind == "competition"`` (an MLE-bench prepared folder, ``verifyless.task.tabular``) is verified
    like a native task; its public data and held-out labels live in a kept split folder.
    """

    name: str
    root: Path
    kind: str  # "native", "openevolve" or "competition": a TaskKind.name
    statement: str
    program_file: str  # file name inside the workspace, e.g. "solution.py"
    baseline_program: str  # full text of the baseline program
    band: Band
    metric: Metric
    anchors: Anchors = field(default_factory=Anchors)
    public_data: tuple[Path, ...] = ()  # copied into the workspace (read by candidates)
    hidden_data: tuple[Path, ...] = ()  # only the trusted scorer reads these
    run_command: tuple[str, ...] = ()  # argv template: {python} {program} {public} {workdir} {outdir}
    scorer: str | None = None  # "file.py:function" relative to root, or a command template
    validation_metrics: tuple[str, ...] = ()
    test_metrics: tuple[str, ...] = ()  # declared; a scorer key named with HIDDEN_PREFIXES is hidden test too
    # A score on rows search never optimised (a held-out selection split, or repeated scoring), kept hidden like
    # the test metrics and used only to choose the final node among the best by validation (engine.selection_pool).
    selection_metric: str | None = None
    limits: Limits = field(default_factory=Limits)
    stochastic: bool = False
    idea_space: IdeaSpace | None = None
    evaluator: Path | None = None  # openevolve only
    cascade: tuple[str, ...] = ()  # openevolve: evaluate_stage1.. names present
    description: str = ""  # one line, for `verifyless tasks`
    policy: Mapping[str, str] = field(default_factory=dict)  # network/subprocess -> allow|warn|forbid (guards)
    ensemble: Ensemble | None = None  # optional: how a top-K ensemble submission combines outputs
    target: Target | None = None  # optional: the declared target column and problem kind (data.target)
    fidelity: Fidelity = field(default_factory=Fidelity)  # optional cheaper levels (task.yaml `fidelity:`)

    @property
    def settings_file(self) -> str:
        """The file a user edits to change this task's settings (idea space, anchors, limits): ``task.yaml`` in a
        native folder, the ``verifyless.yaml`` sidecar in an OpenEvolve or competition folder."""
        return "task.yaml" if self.kind == "native" else "verifyless.yaml"

    @property
    def evaluator_in_sandbox(self) -> bool:
        """Whether the evaluator runs next to the program, inside the sandbox (OpenEvolve folders): then there is
        no trusted scorer, no hidden split and no hidden test score."""
        return self.evaluator is not None
