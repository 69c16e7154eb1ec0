"""Offline roles for tasks that declare an idea space: no LLM, fully deterministic.

- ``SpaceProposer`` proposes ideas as small moves in the space: the parent's
  assignment with one or two dimensions changed.
- ``TemplateImplementer`` renders the band for an idea's full assignment and
  puts it between the task's fixed regions.
- ``DeterministicSummarizer`` describes a program from the option descriptions
  of its assignment (or, for programs the space did not produce, from the
  band's structure) without judging it.
- ``StaticBriefer`` builds the task brief from the task record and fixed
  criteria, one per dimension plus a few general ones.

They make the whole loop (propose, implement, summarise, screen, verify)
runnable and testable offline, and give screeners a search space where some
moves help, some hurt and some change nothing.
"""

from __future__ import annotations

import ast
import itertools
import random
from collections import Counter
from collections.abc import Mapping

from verifyless.errors import TaskError
from verifyless.node import Idea, Operator
from verifyless.program import BandError, extract, fixed_region_violation, replace, syntax_error
from verifyless.roles.base import Implementation, ParentInfo, ProposeContext, RoleFailure, Roles, TaskBrief
from verifyless.task.base import IdeaSpace, Task
from verifyless.task.space import SpaceError, check_assignment, option, render

Assignment = dict[str, str]


def _space(task: Task) -> IdeaSpace:
    if task.idea_space is None:
        raise TaskError(
            f"task '{task.name}' declares no idea_space, so the offline roles cannot be used; "
            "add an idea_space (docs/design/task-format.md) or configure LLM roles"
        )
    return task.idea_space


def assignment_of(idea: Idea | None, space: IdeaSpace) -> Assignment | None:
    """The full assignment stored in ``idea.params["assignment"]``, or None if absent/invalid."""
    if idea is None or not isinstance(idea.params.get("assignment"), Mapping):
        return None
    try:
        return check_assignment(space, idea.params["assignment"])
    except SpaceError:
        return None


def _key(assignment: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(assignment.items()))


class SpaceProposer:
    """Propose ``n`` distinct untried moves away from the parent's assignment.

    The parent's assignment comes from ``ParentInfo.idea.params["assignment"]``;
    a parent without one (the baseline, or a program written by an LLM) is
    treated as the baseline assignment. Each idea changes one dimension with
    probability ``single_change_p``, else two. A move is skipped when it was
    tried before from the same parent (internal set keyed by parent id and
    assignment), when its text is in ``ctx.avoid``, or when it renders a band
    identical to the parent's or to another idea of the same call (a move that
    changes no code is not an idea). With ``Operator.REFERENCE`` or
    ``AGGREGATE``, moves that adopt options from ``ctx.references`` come first.
    When every one- and two-dimension move from this parent has been tried,
    random jumps that change three or more dimensions keep the search moving
    (bounded attempts; fewer than ``n`` ideas come back when none is new).

    Fewer than ``n`` ideas are returned once the neighbourhood is exhausted.
    Randomness: ``random.Random`` seeded from (rng_seed, ctx.seed, parent id,
    how many times this parent was expanded), so results do not depend on the
    order in which concurrent parents are served.
    """

    def __init__(self, rng_seed: int = 0, single_change_p: float = 0.6):
        self.rng_seed = rng_seed
        self.single_change_p = single_change_p
        self._tried: set[tuple[str | None, tuple[tuple[str, str], ...]]] = set()
        self._calls: Counter[str | None] = Counter()

    async def propose(self, ctx: ProposeContext, n: int) -> list[Idea | RoleFailure]:
        space = _space(ctx.task)
        parent = assignment_of(ctx.parent.idea, space) or dict(space.baseline)
        call = self._calls[ctx.parent.id]
        self._calls[ctx.parent.id] += 1
        rng = random.Random(f"{self.rng_seed}:{ctx.seed}:{ctx.parent.id}:{call}")

        singles, doubles = _neighbours(space, parent)
        rng.shuffle(singles)
        rng.shuffle(doubles)
        preferred = (
            _from_references(space, parent, ctx) if ctx.operator in (Operator.REFERENCE, Operator.AGGREGATE) else []
        )

        seen_bands = {render(space, parent)}
        avoid = set(ctx.avoid)
        ideas: list[Idea | RoleFailure] = []
        jumps = 0  # once every one- and two-dimension move from this parent was tried, try wider random jumps
        while len(ideas) < n and jumps < 40 * n:
            if preferred:
                move = preferred.pop(0)
            elif singles and (not doubles or rng.random() < self.single_change_p):
                move = singles.pop()
            elif doubles:
                move = doubles.pop()
            else:
                jumps += 1
                move = _jump(space, parent, rng)
                if not move:
                    break
            child = {**parent, **move}
            key = (ctx.parent.id, _key(child))
            if key in self._tried:
                continue
            band = render(space, child)
            text = describe_move(space, parent, child)
            if band in seen_bands or text in avoid:
                continue
            self._tried.add(key)
            seen_bands.add(band)
            changed = [d for d in space.dimensions if child[d] != parent[d]]
            ideas.append(
                Idea(
                    text=text,
                    params={"assignment": child, "changed": changed, "parent_assignment": dict(parent)},
                    tags=tuple(changed),
                )
            )
        return ideas


def _jump(space: IdeaSpace, parent: Mapping[str, str], rng: random.Random) -> Assignment:
    """A random move that changes three or more dimensions (empty when the space has fewer than three)."""
    dims = [d for d, opts in space.dimensions.items() if len(opts) > 1]
    if len(dims) < 3:
        return {}
    chosen = rng.sample(dims, rng.randint(3, len(dims)))
    return {d: rng.choice([o.name for o in space.dimensions[d] if o.name != parent[d]]) for d in chosen}


def _neighbours(space: IdeaSpace, parent: Mapping[str, str]) -> tuple[list[Assignment], list[Assignment]]:
    alternatives = {d: [o.name for o in opts if o.name != parent[d]] for d, opts in space.dimensions.items()}
    singles = [{d: o} for d, opts in alternatives.items() for o in opts]
    doubles = [
        {d1: o1, d2: o2}
        for d1, d2 in itertools.combinations(space.dimensions, 2)
        for o1 in alternatives[d1]
        for o2 in alternatives[d2]
    ]
    return singles, doubles


def _from_references(space: IdeaSpace, parent: Mapping[str, str], ctx: ProposeContext) -> list[Assignment]:
    moves: list[Assignment] = []
    for ref in ctx.references:
        other = assignment_of(ref.idea, space)
        if other is None:
            continue
        differing = [d for d in space.dimensions if other[d] != parent[d]]
        moves += [{d: other[d]} for d in differing]
        moves += [{a: other[a], b: other[b]} for a, b in itertools.combinations(differing, 2)]
    return moves


def describe_move(space: IdeaSpace, parent: Mapping[str, str], child: Mapping[str, str]) -> str:
    """A readable sentence for the change from ``parent`` to ``child``."""
    parts = []
    for dim in space.dimensions:
        if child[dim] == parent[dim]:
            continue
        new = option(space, dim, child[dim])
        parts.append(f"change {dim} from '{parent[dim]}' to '{new.name}' ({new.description.strip().rstrip('.')})")
    if not parts:
        return "Keep the current design unchanged."
    sentence = "; and ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


class TemplateImplementer:
    """Render an idea's assignment into a complete child program.

    The band comes from the task's template; the fixed regions come from the
    task's baseline program, which by contract equals the parent's fixed
    regions (this also keeps line-range bands right when a parent's band has
    grown). The result is checked against the parent: a changed fixed region
    or a syntax error is returned as a ``RoleFailure`` (kind ``guard-failed``),
    as is an idea without a valid assignment (kind ``parse-error``).

    ``repair`` does not re-render: a template is deterministic, so rendering
    again would reproduce the same failing program. It returns a
    ``guard-failed`` failure with ``attempts=0`` so the engine records that no
    repair was possible and moves on.
    """

    async def implement(self, task: Task, parent: ParentInfo, idea: Idea) -> Implementation:
        space = _space(task)
        raw = idea.params.get("assignment")
        if not isinstance(raw, Mapping):
            return Implementation(
                None,
                RoleFailure(
                    "parse-error",
                    "the idea carries no 'assignment' in its params; "
                    "the template implementer only renders idea-space ideas",
                ),
            )
        try:
            band = render(space, raw)
            child = replace(task.baseline_program, task.band, band)
        except (SpaceError, BandError) as exc:
            return Implementation(None, RoleFailure("parse-error", f"cannot render the idea: {exc}"))
        reference = parent.program if task.band.lines is None and parent.program else task.baseline_program
        violation = fixed_region_violation(reference, child, task.band)
        if violation:
            return Implementation(None, RoleFailure("guard-failed", violation))
        error = syntax_error(child, task.program_file)
        if error:
            return Implementation(None, RoleFailure("guard-failed", f"rendered program does not parse: {error}"))
        return Implementation(child)

    async def repair(self, task: Task, program: str, idea: Idea, error: str) -> Implementation:
        reason = (
            "template-rendered programs cannot be repaired: rendering the same assignment again gives the same program"
        )
        return Implementation(None, RoleFailure("guard-failed", reason), attempts=0)


class DeterministicSummarizer:
    """A neutral, reproducible description of a program (no judgement, no score guess).

    Uses the idea's assignment when present, else recognises programs rendered
    from the space (starting from the baseline and matching option fragments,
    then confirming by rendering). Anything else is described from the band's
    structure (imports, functions, most-called names). Aims at roughly 120-200
    words; very small spaces give shorter text.
    """

    async def summarize(self, task: Task, program: str, idea: Idea | None = None) -> str:
        try:
            band = extract(program, task.band)
        except BandError:
            return f"The program for task '{task.name}' has no recognisable editable band, so it cannot be described."
        space = task.idea_space
        assignment = assignment_of(idea, space) if space is not None else None
        if space is not None and assignment is None:
            assignment = recognise(space, band)
        if space is not None and assignment is not None:
            return _describe_assignment(task, space, assignment, band)
        return _describe_structure(task, band)


def recognise(space: IdeaSpace, band: str) -> Assignment | None:
    """The assignment whose rendering equals ``band``, or None if no assignment does.

    Starts from the baseline and improves one dimension at a time, choosing the
    option whose rendering shares the most lines with ``band`` (a few passes
    of coordinate descent); the answer is confirmed by rendering it.
    """
    target = Counter(band.splitlines())

    def distance(candidate: Mapping[str, str]) -> int:
        got = Counter(render(space, candidate).splitlines())
        return sum(((got - target) + (target - got)).values())

    guess = dict(space.baseline)
    try:
        for _ in range(3):
            if render(space, guess) == band:
                return guess
            for dim, options in space.dimensions.items():
                guess[dim] = min((o.name for o in options), key=lambda name: distance({**guess, dim: name}))
        return guess if render(space, guess) == band else None
    except SpaceError:
        return None


def _describe_assignment(task: Task, space: IdeaSpace, assignment: Mapping[str, str], band: str) -> str:
    sentences = [
        f"This program for the task '{task.name}' is assembled from {len(space.dimensions)} design choices "
        f"in its editable part; the fixed part that loads inputs and writes outputs is left as given."
    ]
    for dim in space.dimensions:
        opt = option(space, dim, assignment[dim])
        what = space.descriptions.get(dim) or dim
        sentences.append(f"{dim.capitalize()} ({what}): {opt.description.strip().rstrip('.')}.")
    sentences.append(_structure_sentence(band))
    return " ".join(sentences)


def _describe_structure(task: Task, band: str) -> str:
    return (
        f"This program for the task '{task.name}' keeps the fixed part that loads inputs and writes outputs, "
        f"and its editable part is custom code rather than a combination of predefined options. "
        + _structure_sentence(band)
    )


def _structure_sentence(band: str) -> str:
    try:
        tree = ast.parse(band)
    except SyntaxError:
        return f"The editable part spans {len(band.splitlines())} lines and does not parse on its own."
    imports: list[str] = []
    functions: list[str] = []
    calls: Counter[str] = Counter()
    loops = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(node.name)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name:
                calls[name] += 1
        elif isinstance(node, (ast.For, ast.While)):
            loops += 1
    parts = [f"The editable part spans {len(band.splitlines())} lines"]
    if functions:
        parts.append(f"defines {', '.join(functions)}")
    if imports:
        parts.append(f"imports {', '.join(imports[:8])}")
    text = ", ".join(parts) + f", and contains {loops} loop{'s' if loops != 1 else ''}."
    common = [name for name, _ in calls.most_common(8)]
    if common:
        text += f" The names it calls most often are {', '.join(common)}."
    return text


class StaticBriefer:
    """A ``TaskBrief`` made from the task record, with criteria derived from the space.

    Understanding: name, one-line description, metric and direction, program
    interface, data, limits, then the statement. Criteria: one per idea-space
    dimension plus general ones on generalisation, cost and the output contract.
    Works for tasks without a space too (general criteria only).
    """

    async def brief(self, task: Task, data_report: str = "") -> TaskBrief:  # the data report is not used
        return TaskBrief(understanding=understanding(task), criteria=criteria(task))


def understanding(task: Task) -> str:
    better = "lower" if task.metric.direction == "minimize" else "higher"
    band = (
        f"lines {task.band.lines[0]}-{task.band.lines[1]}"
        if task.band.lines
        else f"the lines between '{task.band.start_marker}' and '{task.band.end_marker}'"
    )
    if task.evaluator_in_sandbox:
        data = "No separate data files; the evaluator runs next to the program, so there is no hidden test split."
    else:
        visible = ", ".join(p.name for p in task.public_data) or "none"
        data = (
            f"Files the program may read: {visible}. {len(task.hidden_data)} hidden file(s) are read only by the "
            f"trusted scorer; test metrics ({', '.join(task.test_metrics) or 'none'}) are never shown to the search."
        )
    lines = [
        f"Task: {task.name} - {task.description}".rstrip(" -"),
        f"Objective: {task.metric.direction} {task.metric.name} ({better} is better); other validation metrics: "
        f"{', '.join(m for m in task.validation_metrics if m != task.metric.name) or 'none'}.",
        f"Interface: the program file {task.program_file}; only {band} may change, everything else must stay identical.",
        data,
        f"Limits per run: {task.limits.wall_seconds:g} s wall time, {task.limits.memory_mb} MB memory, "
        f"{task.limits.threads} thread(s); {'stochastic' if task.stochastic else 'deterministic'} scoring.",
        "",
        task.statement.strip(),
    ]
    return "\n".join(lines)


def criteria(task: Task) -> tuple[str, ...]:
    out = []
    if task.idea_space is not None:
        for dim in task.idea_space.dimensions:
            what = task.idea_space.descriptions.get(dim) or dim
            out.append(
                f"{dim}: is the child's choice of {what} better suited to this data and objective than the parent's?"
            )
    if task.evaluator_in_sandbox:
        out.append(
            f"Reliability: is the change likely to raise {task.metric.name} by design rather than by a lucky start?"
        )
    else:
        out.append(
            f"Generalisation: is the change likely to improve {task.metric.name} on unseen data "
            "rather than only fit the validation split?"
        )
    out += [
        f"Cost: does the child still finish well within {task.limits.wall_seconds:g} s on one CPU thread?",
        "Robustness: does the child keep the output contract and avoid numerical failures (NaN, divergence, empty output)?",
    ]
    return tuple(out)


def space_roles(task: Task, seed: int = 0) -> Roles:
    """The four offline roles for ``task``; raises ``TaskError`` if it has no idea space."""
    _space(task)
    return Roles(
        briefer=StaticBriefer(),
        proposer=SpaceProposer(seed),
        implementer=TemplateImplementer(),
        summarizer=DeterministicSummarizer(),
    )


__all__ = [
    "DeterministicSummarizer",
    "SpaceProposer",
    "StaticBriefer",
    "TemplateImplementer",
    "assignment_of",
    "criteria",
    "describe_move",
    "recognise",
    "space_roles",
    "understanding",
]
