"""Proposer (policy) training: critic-in-the-loop GRPO under a verification budget.

``contract`` holds the records and the ``Rewarder`` protocol shared by the
reward pipeline (``rewards``) and the trainer (``trainer``).
"""

__all__: list[str] = []  # the modules are the interface
