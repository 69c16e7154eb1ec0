"""``verify`` names each score's split as a user meets it (issue 54, item 9): the selection split's ``sel_*`` score
is hidden from search but is no test score, so it is not labelled "hidden test"."""

from __future__ import annotations

from cli_runs import in_process
from competitions import cache, competition  # noqa: F401  (cache: autouse fixture)


def test_verify_labels_the_selection_split_apart_from_the_hidden_test(tmp_path, monkeypatch, capsys):
    root = competition(tmp_path)
    (root / "verifyless.yaml").write_text("metric: auc\nsplit: {validation: 0.2, selection: 0.2}\n")
    out = in_process(monkeypatch, capsys, "verify", str(root))
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: " ".join(line.split()[2:]) for line in out.stdout.splitlines() if "_auc" in line}
    assert rows == {"val_auc": "validation", "sel_auc": "selection split", "test_auc": "hidden test"}, out.stdout
