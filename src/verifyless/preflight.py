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
  one summarizer call; an LLM screener adds one request per candidate; the novelty judge is not counted
  (it is asked only for near misses). Per run: one brief and the baseline's summary. ``roles.kind: space``
  makes children without an LLM.
* tokens: ``PROMPT_TOKENS`` + ``COMPLETION_TOKENS`` per call (a critic's ``k`` samples count ``k``
  completions); cost: those tokens at the role's model prices (``prices`` of a mapping spec; a spec
  string has no price table, so its calls count as 0 and the plan says the cost is not estimated).
  Without ``budget.verifications`` nothing is estimated, and the plan names the caps that stop the run.

Warnings: a ``budget.cost`` cap with no price table (it cannot bind; ``config.validate`` refuses it when it
is the only cap); no verification beyond the baseline; fewer verifications than one expansion sends
(``verify_per_expansion``); for ``islands``, fewer expansions than ``n_islands * migration_interval`` (no
island is ever migrated to, GEPA's issue #375); a learning screener with fewer outcomes than it needs
to leave its cold start is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verifyless.config import RunConfig
from verifyless.config import priced as any_priced
from verifyless.errors import ConfigError
from verifyless.model.config import parse_spec
from verifyless.screen.options import LLMOptions
from verifyless.search.islands import IslandsConfig

PROMPT_TOKENS = 3_000  # a typical role prompt: task statement, parent band, context
COMPLETION_TOKENS = 800  # a typical reply: an idea, a band, a summary or a critique


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
            + ("" if self.tokens is None else f" ({PROMPT_TOKENS} prompt + {COMPLETION_TOKENS} completion a call)"),
            f"cost:          {self._cost()}",
        ]
        return out + [f"warning: {w}" for w in self.warnings]

    def _cost(self) -> str:
        if not self.uses_llm:
            return "none (no LLM calls)"
        if not self.priced:
            return "not estimated (no model in roles.models has a price table; its calls are counted as 0)"
        return "not estimated (no budget.verifications cap)" if self.cost is None else f"about {round(self.cost, 4)}"


def plan(cfg: RunConfig) -> Plan:
    """The plan of ``cfg`` (module docstring for the rules); reads nothing but ``cfg``."""
    eng = cfg.engine
    verifications = cfg.budget.verifications
    expansions = None if verifications is None else max(0, verifications - 1) // eng.verify_per_expansion
    if expansions is not None and eng.max_rounds is not None:
        expansions = min(expansions, eng.max_rounds * eng.expansions_per_round)
    calls_each, completions_each = _calls_per_expansion(cfg)
    fixed = 2 if cfg.roles.kind == "llm" else 0  # the brief and the baseline's summary
    llm_calls = None if expansions is None else fixed + expansions * calls_each
    completions = None if expansions is None else fixed + expansions * completions_each
    tokens = None if llm_calls is None or completions is None else llm_calls * PROMPT_TOKENS
    if tokens is not None and completions is not None:
        tokens += completions * COMPLETION_TOKENS
    prompt_price, completion_price, priced = _prices(cfg)
    cost = None
    if llm_calls is not None and completions is not None:
        cost = (llm_calls * PROMPT_TOKENS * prompt_price + completions * COMPLETION_TOKENS * completion_price) / 1e6
    caps = cfg.budget.model_dump()
    other = tuple(f"budget.{k}={v:g}" for k, v in caps.items() if k != "verifications" and v is not None)
    warnings = tuple(_warnings(cfg, expansions, any_priced(cfg)))
    return Plan(verifications, expansions, llm_calls, tokens, cost, priced, warnings, fixed + calls_each > 0, other)


def _calls_per_expansion(cfg: RunConfig) -> tuple[int, int]:
    """(LLM requests, completions) one expansion makes: its children's calls and an LLM screener's."""
    n = cfg.engine.candidates
    child_calls = 1 + 2 * n if cfg.roles.kind == "llm" else 0
    options = cfg.screener.options
    if not isinstance(options, LLMOptions):
        return child_calls, child_calls
    samples = int(getattr(options, "k", 1) or 1)
    return child_calls + n, child_calls + n * samples


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


__all__ = ["COMPLETION_TOKENS", "PROMPT_TOKENS", "Plan", "plan"]
