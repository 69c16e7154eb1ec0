"""Instant benchmark program: its score is the constant VALUE inside the editable band.

Used by bench/overhead.py to time evolution frameworks with no real work to do:
every framework loads this same folder (OpenEvolve layout), a scripted LLM
rewrites VALUE, and the evaluator returns at once (or after a configured sleep).
"""

# EVOLVE-BLOCK-START
VALUE = 0
# EVOLVE-BLOCK-END


def score_value() -> float:
    """The number the evaluator reports as combined_score (VALUE + 1, so it is always positive)."""
    return float(VALUE) + 1.0
