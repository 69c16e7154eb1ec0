"""Read-only views of the novelty gate and of model ensembles, from a run's events.

``novelty_rates``: from the ``novelty`` events, how many candidates the gate checked, rejected and
audited, its reject rate, the measured false-rejection rate (audited rejections whose verified child
improved on its parent, over audited ones; the one outcome rule at the run's tie tolerance) and the
verifications it saved (rejections that were not audited). ``model_shares``: from the ``model_choice``
events, per ensemble role and member, the calls and share of the role's calls, and the outcomes of the
calls made for a verified node (``owner``): observed and improved. ``role`` is the ensemble's
``roles.models`` key (an implementer ensemble also answers the ``repair`` requests). Both are None / empty for a run
without the gate or an ensemble. ``show --json``, the HTML report and the dashboard read these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from verifyless.events import ModelChosen, NoveltyJudged
from verifyless.outcome import node_improved
from verifyless.store.protocol import RunStoreProtocol


@dataclass(frozen=True)
class NoveltyRates:
    """The gate's counts and rates over one run (rates None when nothing was checked / audited)."""

    checked: int
    rejected: int  # not audited: never verified
    audited: int  # rejected, verified anyway
    audited_improved: int

    @property
    def reject_rate(self) -> float | None:
        return (self.rejected + self.audited) / self.checked if self.checked else None

    @property
    def false_rejection_rate(self) -> float | None:
        return self.audited_improved / self.audited if self.audited else None

    @property
    def verifications_saved(self) -> int:
        return self.rejected

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "reject_rate": self.reject_rate,
            "false_rejection_rate": self.false_rejection_rate,
            "verifications_saved": self.verifications_saved,
        }


@dataclass(frozen=True)
class ModelShare:
    """One ensemble member of one role: its calls, its share of the role's calls, the outcomes of its nodes."""

    role: str
    model: str
    calls: int
    share: float
    observed: int
    improved: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def peers_lines(novelty: NoveltyRates | None, shares: list[ModelShare]) -> list[str]:
    """One line for the gate and one per ensemble member, for ``show`` and the report (empty when neither ran)."""
    out = []
    if novelty is not None:
        rate, false = novelty.reject_rate, novelty.false_rejection_rate
        out.append(
            f"novelty gate: {novelty.checked} checked, {novelty.rejected + novelty.audited} rejected "
            f"({100 * (rate or 0):.0f}%), {novelty.audited} audited, false rejections "
            + ("n/a" if false is None else f"{novelty.audited_improved}/{novelty.audited} ({100 * false:.0f}%)")
            + f", {novelty.verifications_saved} verifications saved"
        )
    for m in shares:
        out.append(
            f"ensemble {m.role}: {m.model} {m.calls} calls ({100 * m.share:.0f}%), "
            f"improved {m.improved} of {m.observed} verified"
        )
    return out


def novelty_rates(store: RunStoreProtocol, run_id: str) -> NoveltyRates | None:
    verdicts = [e.record for e in store.events(run_id, NoveltyJudged)]
    if not verdicts:
        return None
    better = _improved_by_node(store, run_id)
    audited = [str(v.candidate_id) for v in verdicts if v.outcome == "audited"]
    rejected = sum(v.outcome == "rejected" for v in verdicts)
    return NoveltyRates(len(verdicts), rejected, len(audited), sum(better.get(c, False) for c in audited))


def model_shares(store: RunStoreProtocol, run_id: str) -> list[ModelShare]:
    choices = [e.record for e in store.events(run_id, ModelChosen)]
    if not choices:
        return []
    better = _improved_by_node(store, run_id)
    tally: dict[tuple[str, str], list[int]] = {}
    totals: dict[str, int] = {}
    for c in choices:
        role = str(c.ensemble or c.role)  # the roles.models key (a request role before)
        model, owner = str(c.model), str(c.owner)
        counts = tally.setdefault((role, model), [0, 0, 0])
        counts[0] += 1
        totals[role] = totals.get(role, 0) + 1
        if owner in better:
            counts[1] += 1
            counts[2] += int(better[owner])
    return [
        ModelShare(role, model, n, n / totals[role], observed, won)
        for (role, model), (n, observed, won) in sorted(tally.items())
    ]


def _improved_by_node(store: RunStoreProtocol, run_id: str) -> dict[str, bool]:
    """Per verified node with a parent: whether it improved on the parent (``outcome.improved``)."""
    nodes = {n.id: n for n in store.nodes(run_id)}
    tie = float(store.run(run_id).config.get("tie_tolerance", 0.0) or 0.0)
    out = {}
    for node in nodes.values():
        parent = nodes.get(node.parent_id or "")
        if node.status.verified and parent is not None:
            out[node.id] = node_improved(node, parent, tie)
    return out


__all__ = ["ModelShare", "NoveltyRates", "model_shares", "novelty_rates", "peers_lines"]
