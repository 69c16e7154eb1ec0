"""Reply parsing: code blocks, SEARCH/REPLACE edits, approach sections, briefs."""

from __future__ import annotations

import pytest

from verifyless.errors import ParseError
from verifyless.roles.parse import (
    Edit,
    EditError,
    apply_edits,
    clean_reply,
    clean_summary,
    code_blocks,
    extract_approach,
    parse_brief,
    parse_search_replace,
    pick_code_block,
    strip_code_blocks,
    trim_words,
)

BAND = "def f(x):\n    return x + 1"

# (name, reply, expected code or None)
CODE_CASES = [
    ("python fence", "```python\ndef f(x):\n    return x + 1\n```", BAND),
    ("py tag", "```py\ndef f(x):\n    return x + 1\n```", BAND),
    ("no lang", "```\ndef f(x):\n    return x + 1\n```", BAND),
    ("Python capitalised + attrs", "```Python title=solution.py\ndef f(x):\n    return x + 1\n```", BAND),
    ("prose around", "Here is the new band:\n\n```python\ndef f(x):\n    return x + 1\n```\n\nThis adds one.", BAND),
    ("CRLF", "Sure.\r\n```python\r\ndef f(x):\r\n    return x + 1\r\n```\r\n", BAND),
    ("bare CR", "```python\rdef f(x):\r    return x + 1\r```", BAND),
    ("missing closing fence", "```python\ndef f(x):\n    return x + 1\n", BAND),
    ("tilde fence", "~~~python\ndef f(x):\n    return x + 1\n~~~", BAND),
    ("four backticks", "````python\ndef f(x):\n    return x + 1\n````", BAND),
    (
        "longest of several",
        "Old line:\n```python\nreturn x\n```\nNew band:\n```python\ndef f(x):\n    return x + 1\n```\nUse: \n```python\nf(2)\n```",
        BAND,
    ),
    (
        "bash block ignored",
        "```bash\npip install numpy scipy scikit-learn pandas\n```\n```python\ndef f(x):\n    return x + 1\n```",
        BAND,
    ),
    ("only other language", "```text\nhello world\n```", "hello world"),
    ("indented fence in list", "1. Replace the band:\n   ```python\n   def f(x):\n       return x + 1\n   ```", BAND),
    (
        "think block dropped",
        "<think>\n```python\nwrong = 1\n```\n</think>\n```python\ndef f(x):\n    return x + 1\n```",
        BAND,
    ),
    (
        "unclosed think",
        "reasoning ```python\nlong_wrong_block = [1, 2, 3, 4, 5, 6, 7]\n```\n</think>```python\ndef f(x):\n    return x + 1\n```",
        BAND,
    ),
    (
        "inner fence with info not a close",
        "```python\ns = '''\n```python\n'''\ndef f(x):\n    return x + 1\n```",
        "s = '''\n```python\n'''\n" + BAND,
    ),
    ("blank lines kept inside", "```python\ndef f(x):\n\n\n    return x + 1\n```", "def f(x):\n\n\n    return x + 1"),
    ("no fence at all", "def f(x):\n    return x + 1", None),
    ("empty block", "```python\n```", None),
    ("trailing spaces on fence", "```python   \ndef f(x):\n    return x + 1\n```   ", BAND),
    ("equal length tie picks last", "```python\na = 1\n```\n```python\nb = 2\n```", "b = 2"),
]


@pytest.mark.parametrize("name,reply,expected", CODE_CASES, ids=[c[0] for c in CODE_CASES])
def test_pick_code_block(name: str, reply: str, expected: str | None) -> None:
    assert pick_code_block(reply) == expected


def test_pick_code_block_skips_echoed_parent_band() -> None:
    old = "def f(x):\n    return x + 1\n    # a longer unchanged parent band that is echoed first"
    reply = f"Current:\n```python\n{old}\n```\nNew:\n```python\ndef f(x):\n    return x + 2\n```"
    assert pick_code_block(reply) == old  # longest wins by default
    assert pick_code_block(reply, avoid=old) == "def f(x):\n    return x + 2"


def test_code_blocks_reports_languages_and_closure() -> None:
    blocks = code_blocks("```bash\nls\n```\ntext\n```python\nx = 1\n")
    assert [(b.lang, b.body, b.closed) for b in blocks] == [("bash", "ls", True), ("python", "x = 1", False)]


def test_strip_code_blocks_and_clean_reply() -> None:
    assert strip_code_blocks("a\n```python\nx = 1\n```\nb\n```\nopen") == "a\nb"
    assert clean_reply("<THINK>hmm</THINK>\r\nanswer\r\n") == "answer"


# (name, reply, expected edits)
SR_CASES = [
    ("single", "<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE", [Edit("a = 1", "a = 2")]),
    (
        "in fence with prose",
        "Change this:\n```python\n<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n```\nDone.",
        [Edit("a = 1", "a = 2")],
    ),
    (
        "two blocks",
        "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\ntext\n<<<<<<< SEARCH\nc\nd\n=======\n>>>>>>> REPLACE",
        [Edit("a", "b"), Edit("c\nd", "")],
    ),
    ("CRLF", "<<<<<<< SEARCH\r\na = 1\r\n=======\r\na = 2\r\n>>>>>>> REPLACE\r\n", [Edit("a = 1", "a = 2")]),
    ("seven markers loose spacing", "<<<<<<<SEARCH\nx\n  =======  \ny\n>>>>>>>  REPLACE", [Edit("x", "y")]),
    ("lower case markers", "<<<<<<< search\nx\n=======\ny\n>>>>>>> replace", [Edit("x", "y")]),
    ("none", "just prose, no edits", []),
]


@pytest.mark.parametrize("name,reply,expected", SR_CASES, ids=[c[0] for c in SR_CASES])
def test_parse_search_replace(name: str, reply: str, expected: list[Edit]) -> None:
    assert parse_search_replace(reply) == expected


@pytest.mark.parametrize(
    "reply,fragment",
    [
        ("<<<<<<< SEARCH\na\nb\n", "never divided"),
        ("<<<<<<< SEARCH\na\n=======\nb\n", "not closed"),
        ("<<<<<<< SEARCH\na\n>>>>>>> REPLACE", "no '=======' divider"),
        (
            "<<<<<<< SEARCH\na\n=======\nb\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE",
            "block 1 has no '>>>>>>> REPLACE'",
        ),
    ],
)
def test_parse_search_replace_malformed(reply: str, fragment: str) -> None:
    with pytest.raises(ParseError, match=fragment.replace("(", r"\(")):
        parse_search_replace(reply)


CODE = "def f(x):\n    y = x  +  1\n    if y > 2:\n        return y\n    return 0\n"


def test_apply_exact() -> None:
    out = apply_edits(CODE, [Edit("    return 0", "    return -1")])
    assert out == CODE.replace("return 0", "return -1")


def test_apply_whitespace_normalised() -> None:
    out = apply_edits(CODE, [Edit("    y = x + 1   \n", "    y = x + 2")])
    assert "    y = x + 2\n" in out and out.endswith("\n")


def test_apply_indentation_insensitive_reindents_replacement() -> None:
    search = "if y > 2:\n    return y"
    replace = "if y > 3:\n    return y * 2\nelse:\n    pass"
    out = apply_edits(CODE, [Edit(search, replace)])
    assert "    if y > 3:\n        return y * 2\n    else:\n        pass\n    return 0\n" in out


def test_apply_ambiguous_is_rejected() -> None:
    with pytest.raises(EditError, match="matches 2 places"):
        apply_edits("a = 1\nb = 2\na = 1\n", [Edit("a = 1", "a = 3")])


def test_apply_no_match_names_block_and_closest_lines() -> None:
    edits = [Edit("    return 0", "    return 1"), Edit("    if y > 5:\n        return y", "pass")]
    with pytest.raises(EditError) as info:
        apply_edits(CODE, edits)
    msg = str(info.value)
    assert info.value.index == 2
    assert "SEARCH block 2 of 2 did not match" in msg
    assert "lines 3-4" in msg and "if y > 2:" in msg
    assert "'if y > 5:'" in msg  # first difference names both sides


def test_apply_empty_search_only_fills_empty_text() -> None:
    assert apply_edits("\n", [Edit("", "x = 1")]) == "x = 1\n"
    with pytest.raises(EditError, match="empty"):
        apply_edits(CODE, [Edit("", "x = 1")])


def test_apply_deletion_and_sequence() -> None:
    out = apply_edits(CODE, [Edit("    if y > 2:\n        return y\n", ""), Edit("return 0", "return y")])
    assert out == "def f(x):\n    y = x  +  1\n    return y\n"


# (name, reply, expected start of approach or None)
APPROACH_CASES = [
    (
        "markdown heading",
        "## Approach\nUse gradient boosting with 300 shallow trees and early stopping on validation.",
        "Use gradient boosting",
    ),
    (
        "bold inline",
        "**Approach:** Replace the mean with a ridge regression on lagged features, alpha 1.0.",
        "Replace the mean",
    ),
    ("plain colon", "Approach: Standardise the features and fit an SVM with an RBF kernel, C=10.", "Standardise"),
    (
        "tag",
        "[APPROACH]\nSwitch the loss to Huber with delta 1.0 so outliers stop dominating the fit.",
        "Switch the loss",
    ),
    (
        "numbered heading",
        "### 1. Proposed approach\nAdd a cosine learning-rate schedule with 5 warm-up epochs to the optimiser.",
        "Add a cosine",
    ),
    ("no heading", "I propose to add dropout of 0.3 after each hidden layer to reduce overfitting here.", "I propose"),
    (
        "stops at next section",
        "## Approach\nUse label smoothing of 0.1 on the cross-entropy loss during training.\n## Expected impact\nHigher accuracy.",
        "Use label smoothing",
    ),
    (
        "code removed",
        "## Approach\nReplace the linear model with k-nearest neighbours, k=7, distance weighted.\n```python\nmodel = KNN()\n```",
        "Replace the linear",
    ),
    ("garbage", "ok", None),
    ("only code", "```python\nx = 1\n```", None),
    (
        "prose starting with the word",
        "Approach this problem by averaging five seeds of the same model.",
        "Approach this",
    ),
]


@pytest.mark.parametrize("name,reply,start", APPROACH_CASES, ids=[c[0] for c in APPROACH_CASES])
def test_extract_approach(name: str, reply: str, start: str | None) -> None:
    out = extract_approach(reply)
    if start is None:
        assert out is None
    else:
        assert out is not None and out.startswith(start), out
        assert "```" not in out and "Expected impact" not in out and "Higher accuracy" not in out


def test_extract_approach_keeps_subheadings_of_a_deeper_level() -> None:
    reply = (
        "## Approach\nTwo-stage model with a classifier then a regressor.\n### Details\nThe classifier uses 200 trees."
    )
    out = extract_approach(reply)
    assert out is not None and "200 trees" in out


BRIEF = """Sure, here is the briefing.

[TASK UNDERSTANDING]
Modality: tabular regression
Metric: mse (lower is better)
Data: 400 rows, 10 numeric features.
Submission interface: `model(x)` returns a float.
Constraints: 60 s, one CPU thread.

[CRITERIA]
1. Metric alignment - does the change target squared error
2. Overfitting risk - capacity versus 400 rows
   and the noise level
3. Compute fit - trains in under 60 s on one thread
- Feature handling - scaling and interactions
* Robustness - outliers in the target
"""


def test_parse_brief() -> None:
    understanding, criteria = parse_brief(BRIEF)
    assert understanding.startswith("Modality: tabular regression") and "Sure" not in understanding
    assert len(criteria) == 5
    assert criteria[1] == "Overfitting risk - capacity versus 400 rows and the noise level"
    assert criteria[4] == "Robustness - outliers in the target"


def test_parse_brief_markdown_headings_and_cap() -> None:
    items = "\n".join(f"{i}) Criterion {i} - check {i}" for i in range(1, 13))
    understanding, criteria = parse_brief(
        f"## Task understanding\nImage classification.\n\n## Task-specific criteria\n{items}"
    )
    assert understanding == "Image classification."
    assert len(criteria) == 10 and criteria[0] == "Criterion 1 - check 1"


@pytest.mark.parametrize(
    "reply,fragment",
    [
        ("[TASK UNDERSTANDING]\nStuff.\n", "no criteria heading"),
        ("[TASK UNDERSTANDING]\nStuff.\n[CRITERIA]\n1. a\n2. b\n", "found 2 criteria"),
        ("[CRITERIA]\n1. a\n2. b\n3. c\n4. d\n", "understanding"),
    ],
)
def test_parse_brief_errors(reply: str, fragment: str) -> None:
    with pytest.raises(ParseError, match=fragment):
        parse_brief(reply)


@pytest.mark.parametrize(
    "reply",
    [
        "Summary: It fits a ridge model.",
        "**Summary:**\nIt fits a ridge model.",
        "## Child summary\nIt fits a ridge model.",
        "It fits a ridge model.\n```python\nRidge()\n```",
    ],
)
def test_clean_summary(reply: str) -> None:
    assert clean_summary(reply) == "It fits a ridge model."


def test_trim_words_prefers_sentence_end() -> None:
    text = "One two three. Four five six seven. Eight nine ten eleven twelve"
    assert trim_words(text, 20) == text
    assert trim_words(text, 9) == "One two three. Four five six seven."
    assert trim_words(text, 2) == "One two ..."
