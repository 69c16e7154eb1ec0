"""The GRPO objective for the policy loop, written out (no TRL trainer; see ``trainer`` for why).

Per group of G completions for one prompt: advantages ``A_i = (r_i - mean) / (std + 1e-4)``
(``screen.ttl.group_advantages`` with ``eps=ADVANTAGE_EPS``, the one definition TT-GRPO
shares; a group whose rewards are all equal carries no signal and is dropped). Per
completion token t::

    ratio_t = exp(logp_t - old_logp_t)
    loss_t  = -min(ratio_t * A, clip(ratio_t, 1 - eps, 1 + eps) * A) + beta * KL_t
    KL_t    = exp(ref_t - logp_t) - (ref_t - logp_t) - 1        (k3 estimator, as TRL)

``logp`` are log-probabilities of the sampled tokens under the policy (logits
divided by the sampling temperature, as TRL does), ``old_logp`` the same before
the step's first update (equal to ``logp`` on the first pass, so the ratio is 1
and the gradient is the plain policy gradient), ``ref`` under the frozen base
(the adapter disabled). A completion's loss is the mean over its tokens; the
step's loss is the mean over the completions that carry signal (TRL's ``grpo``
loss type).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ADVANTAGE_EPS = 1e-4  # added to a group's reward std before dividing (``screen.ttl.group_advantages``)


@dataclass(frozen=True)
class Sequenced:
    """One sampled completion ready for the loss: its prompt and completion token ids and advantage."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    advantage: float


def token_logps(model: Any, batch: Sequence[Sequenced], pad_id: int, temperature: float) -> tuple[Any, Any]:
    """([B, T] log-probabilities of each completion token, [B, T] 0/1 mask); T = longest completion.

    Sequences are right-padded; completion token j of row b sits at input position
    ``len(prompt) + j`` and is predicted from position ``len(prompt) + j - 1``.
    """
    import torch

    device = next(model.parameters()).device
    width = max(len(s.prompt_ids) + len(s.completion_ids) for s in batch)
    longest = max(len(s.completion_ids) for s in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long, device=device)
    attention = torch.zeros((len(batch), width), dtype=torch.long, device=device)
    gather = torch.zeros((len(batch), longest), dtype=torch.long, device=device)
    targets = torch.full((len(batch), longest), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(batch), longest), device=device)
    for b, s in enumerate(batch):
        full = list(s.prompt_ids) + list(s.completion_ids)
        ids[b, : len(full)] = torch.tensor(full, device=device)
        attention[b, : len(full)] = 1
        n = len(s.completion_ids)
        gather[b, :n] = torch.arange(len(s.prompt_ids) - 1, len(s.prompt_ids) - 1 + n, device=device)
        targets[b, :n] = torch.tensor(s.completion_ids, device=device)
        mask[b, :n] = 1
    logits = model(input_ids=ids, attention_mask=attention).logits.float() / temperature
    picked = torch.gather(logits, 1, gather.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
    logp = torch.log_softmax(picked, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return logp, mask


def grpo_terms(
    logp: Any, old_logp: Any, ref_logp: Any | None, mask: Any, advantages: Any, *, beta: float, clip_epsilon: float
) -> tuple[Any, Any]:
    """(per-completion loss [B], per-completion mean KL [B]) for one micro-batch (see the module docstring)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(1)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * adv)
    if ref_logp is not None:
        diff = ref_logp - logp
        kl = torch.exp(diff) - diff - 1
    else:
        kl = torch.zeros_like(logp)
    per_token = -surrogate + beta * kl
    count = mask.sum(dim=1).clamp(min=1.0)
    return (per_token * mask).sum(dim=1) / count, ((kl * mask).sum(dim=1) / count).detach()


__all__ = ["ADVANTAGE_EPS", "Sequenced", "grpo_terms", "token_logps"]
