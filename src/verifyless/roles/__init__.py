"""The child-making roles (briefer, proposer, implementer, summariser): protocols in ``base``."""

from verifyless.roles.base import Briefer, Implementer, Proposer, Roles, Summarizer

__all__ = ["Briefer", "Implementer", "Proposer", "Roles", "Summarizer"]
