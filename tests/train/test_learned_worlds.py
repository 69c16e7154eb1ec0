"""The demo's verdict says what was won and what was not (issue 54, item 11), on constructed numbers: part 2 once
ended "Screening wins here" on speed alone while the finals were 0.623 against 0.621 with the oracle also at 0.623
and ties counted as half a win."""

from __future__ import annotations

from verifyless.train.learned_worlds import ArmSummary, verdict_line

RANDOM = ArmSummary("random", 16, 30, 0.621, 14.1, None, reach_ci=(12.9, 15.2))
ORACLE = ArmSummary("oracle", 16, 30, 0.623, 3.0, (0.6, 0.52, 0.68), reach_ci=(2.4, 3.7))


def arm(margin: tuple[float, float, float], saved: tuple[float, float, float], final: float = 0.623) -> ArmSummary:
    return ArmSummary(
        "warm-started",
        16,
        30,
        final,
        6.2,
        (0.62, 0.53, 0.71),
        reach_ci=(4.8, 7.9),
        margin=margin,
        saved=saved,
        ties=0.6,
    )


def test_speed_alone_is_faster_not_better_and_the_final_s_margin_is_given_with_its_interval():
    said = verdict_line(arm((0.002, -0.004, 0.008), (7.9, 5.1, 10.4)), RANDOM, ORACLE)
    assert said.startswith("Screening is faster here, not better. Won: verifications to reach random's final score: ")
    assert "6.2 [4.8, 7.9] of 16 against random's 14.1; the oracle ceiling 3.0 (+7.9 [+5.1, +10.4] saved)" in said
    assert (
        "Not won: the final normalised score: 0.623 against random's 0.621; the oracle ceiling 0.623 "
        "(margin +0.002 [-0.004, +0.008])" in said
    )
    assert "= 0.62 [0.53, 0.71] over 30 seeds, the 60% of seeds that tied counted as half a win." in said
    assert "wins" not in said.split(".")[0]


def test_the_head_follows_the_final_s_interval_then_the_speed_s():
    faster, same, slower = (7.9, 5.1, 10.4), (0.1, -1.0, 1.2), (-3.0, -5.0, -1.0)
    higher, tied, lower = (0.02, 0.01, 0.03), (0.0, -0.01, 0.01), (-0.02, -0.03, -0.01)
    assert verdict_line(arm(higher, faster), RANDOM, ORACLE).startswith("Screening wins here. Won: verifications")
    assert "Not won: nothing." in verdict_line(arm(higher, faster), RANDOM, ORACLE)
    assert verdict_line(arm(higher, same), RANDOM).startswith("Screening wins here. Won: the final normalised score")
    assert verdict_line(arm(lower, faster), RANDOM).startswith("Screening LOSES to random here. Won: verifications")
    assert verdict_line(arm(tied, slower), RANDOM).startswith("Screening is slower here, and no better. Won: nothing")
    assert verdict_line(arm(tied, same), RANDOM).startswith("No clear win for screening here. Won: nothing beyond")
    assert verdict_line(RANDOM, RANDOM) == "random: no comparison with random"


def test_the_share_of_the_oracle_s_saving_is_on_the_means_with_a_paired_interval():
    from verifyless.train.learned_worlds import oracle_share

    rnd, best = [20.0, 24.0, 16.0, 20.0], [4.0, 8.0, 4.0, 4.0]
    share = oracle_share([12.0, 16.0, 10.0, 12.0], rnd, best)  # saves 7.5 of the oracle's 15
    assert share is not None and share[0] == 0.5 and share[1] <= 0.5 <= share[2] and share[2] - share[1] < 0.3
    assert oracle_share(rnd, rnd, best) == (0.0, 0.0, 0.0)  # random itself
    assert oracle_share(best, rnd, best)[0] == 1.0  # type: ignore[index]
    assert oracle_share([30.0] * 4, rnd, best)[0] < 0  # type: ignore[index]  # slower than random
    assert oracle_share(rnd, rnd, rnd) is None  # the oracle saves nothing: there is no share
