"""Combining members' output files (engine/combine.py): mean and vote, by position or on key columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from verifyless.engine.combine import combine_file, vote
from verifyless.task.base import Ensemble


def _members(tmp_path, name, texts):
    folders = []
    for i, text in enumerate(texts):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        (folder / name).write_text(text)
        folders.append(folder)
    out = tmp_path / "out"
    out.mkdir()
    return folders, out


def test_mean_by_position_keeps_the_comma_separated_table_shape(tmp_path):
    members, out = _members(tmp_path, "p.csv", ["0.2,0.8\n0.6,0.4\n", "0.4,0.6\n1.0,0.0\n"])
    assert combine_file(Ensemble(("p.csv",)), "p.csv", members, out) is None
    assert np.loadtxt(out / "p.csv", delimiter=",") == pytest.approx(np.array([[0.3, 0.7], [0.8, 0.2]]))


def test_vote_by_position_breaks_ties_for_the_best_ranked_member(tmp_path):
    members, out = _members(tmp_path, "y.txt", ["1\n2\n3\n", "2\n2\n4\n", "2\n5\n6\n"])
    assert combine_file(Ensemble(("y.txt",), "vote"), "y.txt", members, out) is None
    # row 1: two votes for 2; row 2: 2 twice; row 3: all differ, so the best-ranked member's 3
    assert list(np.loadtxt(out / "y.txt")) == [2.0, 2.0, 3.0]
    assert vote(["b", "a", "a", "b"]) == "b" and vote(["c"]) == "c"


def test_keyed_mean_matches_rows_on_the_key_in_any_order(tmp_path):
    first = "origin,year,value\n1,10,2.0\n1,11,4.0\n2,10,6.0\n"
    shuffled = "origin,year,value\n2,10,8.0\n1,10,0.0\n1,11,6.0\n"
    members, out = _members(tmp_path, "f.csv", [first, shuffled])
    rule = Ensemble(("f.csv",), key=("origin", "year"))
    assert combine_file(rule, "f.csv", members, out) is None
    got = pd.read_csv(out / "f.csv")
    assert list(got.columns) == ["origin", "year", "value"]
    assert got.values.tolist() == [[1, 10, 1.0], [1, 11, 5.0], [2, 10, 7.0]]  # the best member's order


def test_keyed_vote_combines_text_labels(tmp_path):
    texts = ["id,label\na,cat\nb,dog\n", "id,label\nb,cat\na,dog\n", "id,label\na,cat\nb,cat\n"]
    members, out = _members(tmp_path, "submission.csv", texts)
    assert combine_file(Ensemble(("submission.csv",), "vote", ("id",)), "submission.csv", members, out) is None
    assert pd.read_csv(out / "submission.csv").values.tolist() == [["a", "cat"], ["b", "cat"]]


@pytest.mark.parametrize(
    ("texts", "rule", "says"),
    [
        (["1\n2\n", "1\n2\n3\n"], Ensemble(("f",)), "different shapes"),
        (["id,v\na,1\n", "id,v\nz,1\n"], Ensemble(("f",), key=("id",)), "other keys"),
        (["id,v\na,1\n", "id,w\na,1\n"], Ensemble(("f",), key=("id",)), "other columns"),
        (["id,v\na,1\n", "id,v\na,1\n"], Ensemble(("f",), key=("nope",)), "lacks the key column(s) nope"),
        (["id,v\na,1\na,2\n", "id,v\na,1\na,2\n"], Ensemble(("f",), key=("id",)), "repeats a key"),
        (["id,v\na,x\n", "id,v\na,y\n"], Ensemble(("f",), key=("id",)), "could not be combined"),
        (["1\nx\n", "1\n2\n"], Ensemble(("f",)), "could not be combined"),
    ],
)
def test_members_files_that_do_not_combine_give_a_one_line_reason(tmp_path, texts, rule, says):
    members, out = _members(tmp_path, "f", texts)
    reason = combine_file(rule, "f", members, out)
    assert reason is not None and says in reason and "\n" not in reason


def test_a_member_that_wrote_no_file_is_named(tmp_path):
    members, out = _members(tmp_path, "f", ["1\n", "1\n"])
    (members[1] / "f").unlink()
    assert combine_file(Ensemble(("f",)), "f", members, out) == "member(s) 1 wrote no f"
