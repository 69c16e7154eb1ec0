"""Only ``verifyless/events.py`` (and a module defining its own records) knows event kinds and payload keys.

An AST scan of ``src/verifyless`` and ``bench/`` (the style of tests/test_layers.py). What it detects, precisely:

1. **A kind string in a kind position**: a string constant equal to a registered kind (``verifyless.events.KINDS``,
   policy kinds included) that is (a) compared (``==``, ``!=``, ``in``, ``not in``) with a name ``kind`` or an
   attribute ``.kind``; (b) anywhere inside the value of a ``kinds=`` keyword argument; or (c) a positional
   argument of a call to ``emit``, ``append``, ``append_many`` or ``append_and_fold``. Kind words used for
   other things (a dict key ``"status"``, a progress tag ``"round"``) are not in those positions and pass.
2. **A raw payload read**: an attribute ``.payload`` that is not called (``record.payload()`` is the record's
   own method and passes). Every subscript or ``.get`` on an event payload goes through such an attribute.

The benches drive the product's own path, so they read records too (no file of theirs is allowed).
Allowed: ``events.py``, ``train/policy/events.py`` (records and their keys), and ``store/`` (it turns rows
into records: ``store.records.Event.payload`` is the stored JSON). ``LEGACY`` lists the readers not converted
yet, with how many findings each has: a file may lose findings (then lower its number), never gain one.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import verifyless
import verifyless.train.policy.events  # noqa: F401  (registers the policy kinds)
from verifyless.events import KINDS

PKG = Path(verifyless.__file__).resolve().parent
ALLOWED = {
    "events.py",
    "train/policy/events.py",
    "store/sqlite.py",
    "store/reads.py",
    "store/fold.py",
    "store/records.py",
}
WRITE_CALLS = {"emit", "append", "append_many", "append_and_fold"}

# readers still on raw kinds/payloads, with their finding counts: none left (issue 48); keep it empty
LEGACY: dict[str, int] = {}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _kind_literals(node: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in KINDS]


def findings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every kind literal in a kind position and every raw payload read in ``tree``."""
    out: list[tuple[int, str]] = []
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_name(s) == "kind" for s in sides):
                out += [(c.lineno, f"kind {c.value!r} compared") for s in sides for c in _kind_literals(s)]
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "kinds":
                    out += [(c.lineno, f"kind {c.value!r} in kinds=") for c in _kind_literals(kw.value)]
            if _name(node.func) in WRITE_CALLS:
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value in KINDS:
                        out.append((arg.lineno, f"kind {arg.value!r} written"))
        elif isinstance(node, ast.Attribute) and node.attr == "payload" and id(node) not in called:
            out.append((node.lineno, "raw .payload read"))
    return out


def scan() -> dict[str, list[tuple[int, str]]]:
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel in ALLOWED:
            continue
        hits = findings(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if hits:
            found[rel] = hits
    return found


BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_benches_read_records_too():
    found = {
        p.relative_to(BENCH).as_posix(): hits
        for p in sorted(BENCH.rglob("*.py"))
        if (hits := findings(ast.parse(p.read_text(encoding="utf-8"), str(p))))
    }
    assert found == {}, f"benches reading raw kinds or payloads (read records instead): {found}"


def test_only_the_records_know_kinds_and_payload_keys():
    found = scan()
    grown = {
        rel: hits for rel, hits in found.items() if len(hits) > LEGACY.get(rel, 0)
    }  # a new file, or a legacy one with more
    assert not grown, "\n".join(
        f"{rel}:{line}: {what} (read records: store.events(run_id, SomeRecord) and attributes; see verifyless/events.py)"
        for rel, hits in grown.items()
        for line, what in hits
    )
    shrunk = {rel: n for rel, n in LEGACY.items() if len(found.get(rel, ())) < n}
    assert not shrunk, f"lower these LEGACY counts (fewer findings now): { {r: len(found.get(r, ())) for r in shrunk} }"


def test_the_scan_catches_what_it_claims():
    code = """
for ev in store.events(run_id, kinds=["verification", "tell"]):
    if ev.kind == "screening":
        x = ev.payload["round"]
ledger.emit("final", {})
store.append(run, "llm_call", {})
ok = rec.payload()
progress("round", {"status": 1})
"""
    kinds = Counter(
        what.split(" ")[-1] if "payload" not in what else "payload" for _, what in findings(ast.parse(code))
    )
    assert kinds == Counter({"kinds=": 2, "compared": 1, "payload": 1, "written": 2})
