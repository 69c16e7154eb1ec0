"""The pre-flight budget check: what a run's budget buys, from its configuration alone.

``plan(cfg)`` reads only the ``RunConfig`` (no model is built, no store is opened, nothing is paid)
and returns a ``Plan``: the verifications the budget allows, the expansions they buy, the LLM calls
those expansions make and an estimate of tokens and cost from the models' price tables, plus warnings
when the budget is too small for the strategy to do anything meaningful. ``verifyless run --dry-run``
prints it and exits 0.

The counts are *estimates*, stated as rules so they can be checked:

* verifications: ``budget.verifications`` (None: not capped by count); one of them is the baseline.
* expansions: at most ``(verifications - 1) / verify_per_expansion`` (each expansion sends up to
  ``verify_per_expansion`` candidates to verification; a repair takes a verification of its own, so with
  failing candidates there are fewer).
* LLM calls per expansion (``roles.kind: llm``): one proposer call, then per candidate one implementer and
  one summarizer call; an LLM screener adds one request per candidate, and so does every LLM screener another
  one nests (a cascade's stages, an ensemble's members, the screener ``adaptive`` wraps, which also screens
  ``2 x canaries`` candidates per round boundary); the novelty judge is not counted (it is asked only for near
  misses). Per run: one brief and the baseline's summary. ``roles.kind: space`` makes children without an LLM.
* tokens: a prompt + ``COMPLETION_TOKENS`` per call (a critic's ``k`` samples count ``k`` completions). The
  prompt is ``prompt_tokens(task)`` when the task is given (one implementer prompt for its baseline rendered
  from the package's prompts: statement, program, instructions; characters / ``CHARS_PER_TOKEN``), else a
  flat ``PROMPT_TOKENS``; cost: those tokens at the role's model prices (``prices`` of a mapping spec; a spec
  string has no price table, so its calls count as 0 and the plan says the cost is not estimated).
  Without ``budget.verifications`` nothing is estimated, and the plan names the caps that stop the run.

Warnings: a prompt of the task (with room for a reply) longer than a model's ``context_tokens``; a
``budget.cost`` cap with no price table (it cannot bind; ``config.validate`` refuses it when it
is the only cap); no verification beyond the baseline; fewer verifications than one expansion sends
(``verify_per_expansion``); for ``islands``, fewer expansions than ``n_islands * migration_interval`` (no
island is ever migrated to, GEPA's issue #375); a learning screener with fewer outcomes than it needs
to leave its cold start is not checked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verifyless.config import RunConfig
from verifyless.config import priced as any_priced
from verifyless.errors import ConfigError
from verifyless.model.config import OPENAI_URL, parse_spec
from verifyless.model.probe import context_window
from verifyless.models_wiring import model_specs
from verifyless.node import Idea
from verifyless.program import BandError
from verifyless.roles.base import ParentInfo
from verifyless.roles.llm import LLMImplementer
from verifyless.screen.adaptive import AdaptiveOptions
from verifyless.screen.options import LLMOptions
from verifyless.screen.registry import SCREENERS, nested_screeners
from verifyless.search.islands import IslandsConfig
from verifyless.task.base import Task

PROMPT_TOKENS = 3_000  # a typical role prompt (task statement, parent band, context) when the task is not given
COMPLETION_TOKENS = 800  # a typical reply: an idea, a band, a summary or a critique
CHARS_PER_TOKEN = 4  # English text and code, roughly: no tokenizer is loaded for a pre-flight


@dataclass(frozen=True)
class Plan:
    """What a run's budget buys (None: not bounded by the budget's verification cap)."""

    verifications: int | None
    expansions: int | None
    llm_calls: int | None
    tokens: int | None
    cost: float | None
    priced: bool  # whether any role's model has a price table
    warnings: tuple[str, ...] = field(default=())
    uses_llm: bool = True  # whether the run makes LLM calls at all (LLM roles or an LLM screener)
    other_caps: tuple[str, ...] = ()  # the caps set besides budget.verifications, as ``budget.KEY=VALUE``
    prompt_tokens: int = PROMPT_TOKENS  # per call: the task's rendered prompt, or the flat estimate
    rendered: bool = False  # whether prompt_tokens came from this task's rendered prompt

    def lines(self) -> list[str]:
        """The plan as the lines ``run --dry-run`` prints."""
        uncapped = "not estimated (no budget.verifications cap)"

        def say(value: int | float | None, prefix: str = "") -> str:
            return uncapped if value is None else f"{prefix}{value:,}"

        stops = f"; the run stops on {', '.join(self.other_caps)}" if self.other_caps else ""
        count = (
            f"{self.verifications:,} (the baseline included)"
            if self.verifications is not None
            else f"not capped (budget.verifications is unset){stops}"
        )
        out = [
            f"verifications: {count}",
            f"expansions:    {say(self.expansions, 'up to ')}",
            f"LLM calls:     {say(self.llm_calls, 'about ')}",
            f"tokens:        {say(self.tokens, 'about ')}"
            + ("" if self.tokens is None else f" ({self._per_call()} a call)"),
            f"cost:          {self._cost()}",
        ]
        return out + [f"warning: {w}" for w in self.warnings]

    def _per_call(self) -> str:
        source = " (one rendered prompt of this task)" if self.rendered else ""
        return f"{self.prompt_tokens:,} prompt{source} + {COMPLETION_TOKENS} completion"

    def _cost(self) -> str:
        if not self.uses_llm:
            return "none (no LLM calls)"
        if not self.priced:
            return "not estimated (no model in roles.models has a price table; its calls are counted as 0)"
        return "not estimated (no budget.verifications cap)" if self.cost is None else f"about {round(self.cost, 4)}"


def prompt_tokens(task: Task) -> int:
    """Tokens of one implementer prompt for ``task``'s baseline, rendered as the run would render it (module
    docstring); ``PROMPT_TOKENS`` for a program without a band to render."""
    implementer = LLMImplementer(model=None)  # type: ignore[arg-type]  # rendering reads no model
    idea = Idea("a concrete change to the program, described in about a hundred words " * 8)
    try:
        messages = implementer.render(task, ParentInfo("root", task.baseline_program), idea)
    except BandError:
        return PROMPT_TOKENS
    return max(1, math.ceil(sum(len(m.content or "") for m in messages) / CHARS_PER_TOKEN))


def plan(cfg: RunConfig, task: Task | None = None) -> Plan:
    """The plan of ``cfg`` (module docstring for the rules); reads nothing but ``cfg`` and, when given, ``task``."""
    per_prompt = prompt_tokens(task) if task is not None else PROMPT_TOKENS
    eng = cfg.engine
    verifications = cfg.budget.verifications
    expansions = None if verifications is None else max(0, verifications - 1) // eng.verify_per_expansion
    if expansions is not None and eng.max_rounds is not None:
        expansions = min(expansions, eng.max_rounds * eng.expansions_per_round)
    calls_each, completions_each = _calls_per_expansion(cfg)
    fixed = 2 if cfg.roles.kind == "llm" else 0  # the brief and the baseline's summary
    llm_calls = None if expansions is None else fixed + expansions * calls_each
    completions = None if expansions is None else fixed + expansions * completions_each
    tokens = None if llm_calls is None or completions is None else llm_calls * per_prompt
    if tokens is not None and completions is not None:
        tokens += completions * COMPLETION_TOKENS
    prompt_price, completion_price, priced = _prices(cfg)
    cost = None
    if llm_calls is not None and completions is not None:
        cost = (llm_calls * per_prompt * prompt_price + completions * COMPLETION_TOKENS * completion_price) / 1e6
    caps = cfg.budget.model_dump()
    other = tuple(f"budget.{k}={v:g}" for k, v in caps.items() if k != "verifications" and v is not None)
    warnings = tuple(_context_warnings(cfg, per_prompt) + _warnings(cfg, expansions, any_priced(cfg)))
    return Plan(
        verifications,
        expansions,
        llm_calls,
        tokens,
        cost,
        priced,
        warnings,
        fixed + calls_each > 0,
        other,
        per_prompt,
        task is not None,
    )


def _calls_per_expansion(cfg: RunConfig) -> tuple[int, int]:
    """(LLM requests, completions) one expansion makes: its children's calls and an LLM screener's."""
    n = cfg.engine.candidates
    child_calls = 1 + 2 * n if cfg.roles.kind == "llm" else 0
    requests, completions = _screener_calls(cfg.screener.name, cfg.screener.options, n, cfg.engine.expansions_per_round)
    return child_calls + math.ceil(requests), child_calls + math.ceil(completions)


def _screener_calls(name: str, options: Any, n: float, per_round: int) -> tuple[float, float]:
    """(requests, completions) screener ``name`` makes for ``n`` candidates of one expansion, the screeners it
    nests included (module docstring)."""
    opts: Any = SCREENERS.typed(name, options)
    if isinstance(opts, LLMOptions):
        return n, n * int(getattr(opts, "k", 1) or 1)
    canaries = 2 * opts.canaries / per_round if isinstance(opts, AdaptiveOptions) else 0.0
    calls = [
        _screener_calls(inner, inner_opts, n + canaries, per_round)
        for inner, inner_opts in nested_screeners(name, opts)
    ]
    return sum(c[0] for c in calls), sum(c[1] for c in calls)


def _context_warnings(cfg: RunConfig, per_prompt: int) -> list[str]:
    """A warning per model whose context a prompt of ``per_prompt`` tokens and its reply exceed.

    The context is the spec's ``context_tokens``, else what its server states (``model.probe.context_window``,
    asked of endpoints other than OpenAI's); the models include the implied ``default`` (the ``env`` spec).
    """
    out = []
    try:
        specs = model_specs(cfg)
    except ConfigError:
        specs = dict(cfg.roles.models)
    for role, spec in specs.items():
        for one in spec if isinstance(spec, list) else [spec]:
            try:
                config = parse_spec(one)
            except (ConfigError, ValueError, TypeError):
                continue
            context, reply = config.context_tokens, config.max_tokens or COMPLETION_TOKENS
            if context is None and config.provider == "openai" and config.base_url not in (None, OPENAI_URL):
                context = context_window(str(config.base_url), config.model)
            if context is not None and per_prompt + reply > context:
                out.append(
                    f"roles.models.{role}: a prompt of this task is about {per_prompt:,} tokens, which with a "
                    f"{reply:,}-token reply exceeds the model's context of {context:,} tokens: "
                    "shorten the task's statement (e.g. its column table) or use a model with a longer context"
                )
    return out


def _prices(cfg: RunConfig) -> tuple[float, float, bool]:
    """Per-million-token prices of the proposer/implementer model (else ``default``), and whether one was found."""
    models: Mapping[str, Any] = cfg.roles.models
    for key in ("implementer", "proposer", "default"):
        spec = models.get(key)
        if isinstance(spec, list):
            spec = spec[0] if spec else None
        if spec is None:
            continue
        try:
            config = parse_spec(spec)
        except (ConfigError, ValueError, TypeError):
            continue
        if config.prices:
            price = config.price_for(config.model)
            return price.prompt_per_mtok, price.completion_per_mtok, True
    return 0.0, 0.0, False


def _warnings(cfg: RunConfig, expansions: int | None, priced: bool) -> list[str]:
    out = []
    if cfg.budget.cost is not None and not priced:
        out.append(
            f"budget.cost={cfg.budget.cost:g} cannot bind: no model in roles.models has a price table, so every "
            "call counts as 0; add prices to the models (prices: {prompt_per_mtok: ..., completion_per_mtok: ...})"
        )
    verifications = cfg.budget.verifications
    per = cfg.engine.verify_per_expansion
    if verifications is not None and verifications <= 1:
        out.append("the budget verifies only the baseline: no child will ever be verified")
    elif verifications is not None and verifications - 1 < per:
        out.append(
            f"{verifications - 1} verifications after the baseline are fewer than one expansion sends "
            f"(engine.verify_per_expansion={per}): the first expansion cannot be verified in full"
        )
    options = cfg.strategy.options
    if isinstance(options, IslandsConfig) and expansions is not None:
        interval, islands = options.migration_interval, options.n_islands
        if interval and expansions < islands * interval:
            out.append(
                f"about {expansions} expansions over {islands} islands never reach the migration interval "
                f"({interval} island-rounds, so ~{islands * interval} expansions): no migration will happen; "
                "raise the budget or lower strategy.options.migration_interval"
            )
    if cfg.roles.kind == "llm" and cfg.budget.verifications is None and cfg.budget.tokens is None:
        if cfg.budget.cost is None:
            out.append("no cap on verifications, tokens or cost: the LLM spend is bounded only by time")
    if expansions == 0 and not out:
        out.append("the budget buys no expansion")
    return out


__all__ = ["CHARS_PER_TOKEN", "COMPLETION_TOKENS", "PROMPT_TOKENS", "Plan", "plan", "prompt_tokens"]
