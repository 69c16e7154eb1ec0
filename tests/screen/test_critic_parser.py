"""Table test for the critic verdict parser (tags, decoration, repetition, the NA rule)."""

from __future__ import annotations

import pytest

from verifyless.screen.critic import LABEL_RANK, LABELS, parse_verdict
from verifyless.screen.prompting import parse_choice

REASONING = (
    "1. Feature handling: the child is better (high weight, 40%).\n"
    "2. Overfitting risk: about the same (medium).\n"
    "Aggregation: the gains on the heavy criterion dominate.\n\n"
)

CASES: list[tuple[str, str | None]] = [
    # -- canonical form
    ("[IMPROVEMENT] improve --- adds features\n[WINTIER] big --- large gap", "BigWin"),
    ("[IMPROVEMENT] improve --- x\n[WINTIER] medium --- y", "MediumWin"),
    ("[IMPROVEMENT] improve --- x\n[WINTIER] small --- y", "SmallWin"),
    ("[IMPROVEMENT] tie --- same model\n[WINTIER] NA --- not a win", "Tie"),
    ("[IMPROVEMENT] lose --- drops data\n[WINTIER] NA --- not a win", "Lose"),
    (REASONING + "# Verdict\n[IMPROVEMENT] improve --- r\n[WINTIER] small --- r", "SmallWin"),
    # -- case and spacing
    ("[improvement] IMPROVE --- r\n[wintier] BIG --- r", "BigWin"),
    ("[ IMPROVEMENT ]   improve   ---   r\n[  WINTIER]medium---r", "MediumWin"),
    ("[Improvement] Tie\n[Wintier] na", "Tie"),
    ("   [IMPROVEMENT] lose --- r   \n\t[WINTIER] N/A", "Lose"),
    # -- markdown decoration
    ("**[IMPROVEMENT]** improve --- r\n**[WINTIER]** big --- r", "BigWin"),
    ("**[IMPROVEMENT] improve** --- r\n**[WINTIER] small** --- r", "SmallWin"),
    ("`[IMPROVEMENT] improve --- r`\n`[WINTIER] medium --- r`", "MediumWin"),
    ("[IMPROVEMENT] **improve** --- r\n[WINTIER] *big* --- r", "BigWin"),
    ("### [IMPROVEMENT] lose --- r\n### [WINTIER] NA --- r", "Lose"),
    ("- [IMPROVEMENT] tie --- r\n- [WINTIER] NA", "Tie"),
    ("* [IMPROVEMENT] improve\n* [WINTIER] small", "SmallWin"),
    ("> [IMPROVEMENT] improve --- r\n> [WINTIER] medium --- r", "MediumWin"),
    ("1. [IMPROVEMENT] improve --- r\n2. [WINTIER] big --- r", "BigWin"),
    ("```\n[IMPROVEMENT] lose --- r\n[WINTIER] NA --- r\n```", "Lose"),
    ("__[IMPROVEMENT]__ improve --- r\n__[WINTIER]__ small --- r", "SmallWin"),
    # -- separators
    ("[IMPROVEMENT]: improve: r\n[WINTIER]: big: r", "BigWin"),
    ("[IMPROVEMENT] improve — r\n[WINTIER] small — r", "SmallWin"),
    ("[IMPROVEMENT] improve – r\n[WINTIER] medium – r", "MediumWin"),
    ("[IMPROVEMENT] improve -- r\n[WINTIER] big -- r", "BigWin"),
    ("[IMPROVEMENT] improve The child replaces a prior.\n[WINTIER] big Moving to a learned model.", "BigWin"),
    ("[IMPROVEMENT] lose\nThe child overfits.\n[WINTIER] NA\nNot an improvement.", "Lose"),
    ("Verdict: [IMPROVEMENT] improve --- r [WINTIER] small --- r", "SmallWin"),
    ("[IMPROVEMENT]\nimprove\n[WINTIER]\nmedium", "MediumWin"),
    # -- accepted inflections and tier spellings
    ("[IMPROVEMENT] Improves --- r\n[WINTIER] Big --- r", "BigWin"),
    ("[IMPROVEMENT] improved\n[WINTIER] BigWin", "BigWin"),
    ("[IMPROVEMENT] improve\n[WINTIER] medium win", "MediumWin"),
    ("[IMPROVEMENT] loses --- r\n[WINTIER] none", "Lose"),
    ("[IMPROVEMENT] tied --- r\n[WINTIER] n.a. --- r", "Tie"),
    # -- repetition: the last occurrence wins
    ("[IMPROVEMENT] tie\n[WINTIER] NA\nOn reflection:\n[IMPROVEMENT] improve\n[WINTIER] medium", "MediumWin"),
    ("[IMPROVEMENT] improve\n[WINTIER] big\nWait, reconsider.\n[IMPROVEMENT] lose\n[WINTIER] NA", "Lose"),
    (
        "Format: [IMPROVEMENT] improve | lose | tie --- <why>\n[WINTIER] big | medium | small | NA\n"
        "[IMPROVEMENT] improve --- r\n[WINTIER] small --- r",
        "SmallWin",
    ),
    ("[IMPROVEMENT] lose --- r\n[WINTIER] NA\n(format was [IMPROVEMENT] improve | lose | tie)", "Lose"),
    ("[IMPROVEMENT] improve --- r\n[WINTIER] big\n[IMPROVEMENT] improve\n[WINTIER] maybe", None),
    # -- NA rule
    ("[IMPROVEMENT] improve --- r\n[WINTIER] NA --- r", None),
    ("[IMPROVEMENT] improve --- r", None),
    ("[IMPROVEMENT] tie --- r\n[WINTIER] big --- r", "Tie"),
    ("[IMPROVEMENT] lose --- r\n[WINTIER] small --- r", "Lose"),
    ("[IMPROVEMENT] lose --- no tier line at all", "Lose"),
    # -- bare tags only without brackets anywhere
    ("**IMPROVEMENT:** improve --- r\n**WINTIER:** medium --- r", "MediumWin"),
    ("Improvement: the child adds features.\n[IMPROVEMENT] tie\n[WINTIER] NA", "Tie"),
    # -- malformed
    ("", None),
    ("The child looks better overall. I predict an improvement.", None),
    ("[IMPROVEMENT] better --- r\n[WINTIER] big", None),
    ("[IMPROVEMENT] worse --- r\n[WINTIER] NA", None),
    ("[IMPROVEMENT] improve | lose | tie --- r\n[WINTIER] big | medium | small | NA", None),
    ("[IMPROVEMENT] improve\n[WINTIER] huge", None),
    ("[IMPROVEMENT] --- it depends\n[WINTIER] NA", None),
    ("[IMPROVMENT] improve\n[WINTIER] big", None),
    ("[WINTIER] big --- only a tier", None),
    ("[IMPROVEMENT] neutral\n[WINTIER] NA", None),
]


@pytest.mark.parametrize("text,label", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_parse_verdict_table(text: str, label: str | None) -> None:
    verdict = parse_verdict(text)
    if label is None:
        assert verdict is None, verdict
    else:
        assert verdict is not None, text
        assert verdict.label == label


def test_table_is_large_and_mixed() -> None:
    assert len(CASES) >= 40
    assert sum(label is None for _, label in CASES) >= 10


def test_label_order_and_three_way_direction() -> None:
    assert LABELS == ("Lose", "Tie", "SmallWin", "MediumWin", "BigWin")
    assert [LABEL_RANK[x] for x in ("BigWin", "MediumWin", "SmallWin", "Tie", "Lose")] == [4, 3, 2, 1, 0]
    assert parse_verdict("[IMPROVEMENT] improve\n[WINTIER] big").improvement == "improve"
    assert parse_verdict("[IMPROVEMENT] tie\n[WINTIER] NA").tier is None


def test_reasons_are_kept() -> None:
    v = parse_verdict("[IMPROVEMENT] improve --- learned features beat priors\n[WINTIER] big --- large gap")
    assert v.reason == "learned features beat priors"
    assert v.tier_reason == "large gap"


@pytest.mark.parametrize(
    "text,options,expected",
    [
        ("Reasoning...\n[CHOICE] A --- a is safer", ("A", "B"), "A"),
        ("**[CHOICE]** b", ("A", "B"), "B"),
        ("[CHOICE] Candidate B --- r", ("A", "B"), "B"),
        ("[CHOICE] A | B --- template\n[CHOICE] B", ("A", "B"), "B"),
        ("[CHOICE] A\nOn reflection [CHOICE] B", ("A", "B"), "B"),
        ("[CHOICE] C", ("A", "B"), None),
        ("I pick A.", ("A", "B"), None),
        ("[CHOICE] #3 --- r", ("1", "2", "3"), "3"),
        ("[CHOICE]: 2.", ("1", "2", "3"), "2"),
        ("[CHOICE] <candidate number> --- r", ("1", "2"), None),
    ],
)
def test_parse_choice(text, options, expected) -> None:
    assert parse_choice(text, options) == expected
