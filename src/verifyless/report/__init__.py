"""Run reports: the run views over a run store (``views``), SVG/PNG figures, and the HTML report.

``verifyless report RUN`` writes one self-contained HTML file plus PNG figures;
``verifyless ui`` (``verifyless.ui``) serves the same views live.
"""

__all__: list[str] = []  # the modules are the interface
