"""``RunState`` lives in ``verifyless.ledger.fold`` (the kernel for paid work); this import path stays for
``engine/learners.py`` and older callers."""

from verifyless.ledger.fold import RunState

__all__ = ["RunState"]
