"""Benchmark task for policy training: the score is a sum of four design choices (each verification charged)."""

# EVOLVE-BLOCK-START
W = 1
X = 1
Y = 1
Z = 1
# EVOLVE-BLOCK-END


def run():
    if Z < 0:
        raise RuntimeError("a negative Z breaks the program (an infeasible child)")
    return 3 * W + 2 * X + Y - abs(Z - 2)
