"""Screeners rank candidates before verification; ``base`` holds their protocols, ``registry`` their names."""

from verifyless.screen.base import LearningScreener, Outcome, OutcomeObserver, ScreenContext, Screener

__all__ = ["LearningScreener", "Outcome", "OutcomeObserver", "ScreenContext", "Screener"]
