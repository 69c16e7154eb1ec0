"""Tabular tasks: MLE-bench competitions loaded unchanged, and tasks made from a CSV (``verifyless task new``).

``competition`` recognises and loads MLE-bench's prepared layout; ``grading`` is the metric registry and the
submission checks (scikit-learn's metrics); ``split`` holds rows out deterministically; ``prepare`` writes a
competition folder from a user's CSV. ``baseline.py`` (the scikit-learn baseline program), ``space.yaml`` (its
idea space) and ``score.py`` (the trusted scorer ``verify`` loads) are files the loader points tasks at.
"""
