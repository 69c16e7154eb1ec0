"""A tiny task for data-collection tests: the score is a weighted sum of three choices."""

# EVOLVE-BLOCK-START
A = 1
B = 1
C = 0
# EVOLVE-BLOCK-END


def run():
    if C < 0:
        raise RuntimeError("a negative C breaks the program (an infeasible child)")
    return 2 * A + B - C
