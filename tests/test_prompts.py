"""The one prompt system: file format, loader, render rules, checker, and byte-identity with the old renderers."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from verifyless.errors import ConfigError
from verifyless.prompts import (
    OPTIONAL,
    Template,
    TemplateError,
    block,
    check_template,
    fill,
    load_template,
    messages,
    parse_template,
    render,
    template_text,
)

FIXTURES = Path(__file__).parent / "fixtures"
CASES = json.loads((FIXTURES / "prompts_rendered.json").read_text(encoding="utf-8"))


def builtin_keys() -> list[str]:
    root = resources.files("verifyless.prompts")
    return sorted(
        f"{owner.name}/{file.name.removesuffix('.md')}"
        for owner in root.iterdir()
        if owner.is_dir() and not owner.name.startswith("_")
        for file in owner.iterdir()
        if file.name.endswith(".md")
    )


@pytest.mark.parametrize("case", CASES, ids=[f"{c['template']}:{c['section']}" for c in CASES])
def test_every_builtin_section_renders_as_the_old_code_did(case) -> None:
    # The expected strings were rendered by the code paths this module replaced (roles.render,
    # screen.prompting, the tune writer, the reviewer, the policy menu, data.synthesize) before the
    # switch; cached replies and replays key on these bytes.
    assert render(case["template"], case["section"], case["values"]) == case["expected"]


def test_the_fixture_covers_every_builtin_template_and_section() -> None:
    covered = {(c["template"], c["section"]) for c in CASES}
    for key in builtin_keys():
        for name in load_template(key).names():
            assert (key, name) in covered, f"{key} section {name} has no pinned rendering"


def test_critic_messages_of_dataset_rows_are_unchanged() -> None:
    from verifyless.critic_data import critic_messages

    for case in json.loads((FIXTURES / "critic_messages_rendered.json").read_text(encoding="utf-8")):
        assert critic_messages(case["row"]) == case["expected"]


def test_builtin_templates_use_one_dialect() -> None:
    for key in builtin_keys():
        raw = resources.files("verifyless.prompts").joinpath(f"{key}.md").read_text(encoding="utf-8")
        assert "<!-- user -->" not in raw, key
        template = load_template(key)
        assert template_text(template).strip() == raw.strip(), key  # the file is exactly its sections
        stray = fill(raw, dict.fromkeys(template.declared, ""))
        assert "{" + "{" not in stray, f"{key} has a placeholder the syntax does not read"


def test_render_is_single_pass_and_names_missing_values() -> None:
    t = parse_template("<!-- section: user -->\n{{a}} {b} {{c}}", "t", "t.md")
    assert render(t, "user", {"a": "{{c}}", "c": "{x}"}) == "{{c}} {b} {x}"
    with pytest.raises(TemplateError, match=r"t.md section 'user' needs values for a, c"):
        render(t, "user", {})
    with pytest.raises(TemplateError, match="has no section 'retry'"):
        render(t, "retry")


def test_blank_optional_lines_disappear_but_values_keep_their_blank_lines() -> None:
    t = parse_template("<!-- section: user -->\nA\n\n{{opt}}\n\nB {{code}}\n", "t", "t.md")
    assert render(t, "user", {"opt": " ", "code": "x\n\n\n\ny"}) == "A\n\nB x\n\n\n\ny"
    assert render(t, "user", {"opt": "o", "code": ""}) == "A\n\no\n\nB "  # only the template is tidied


def test_block_and_messages() -> None:
    t = parse_template(
        "<!-- section: system -->\nS\n<!-- section: user -->\nU {{x}}\n<!-- section: list -->\nL:\n{{items}}",
        "t",
        "t.md",
    )
    assert block(t, "list", []) == ""
    assert block(t, "list", ["a", "b"]) == "L:\na\nb"
    system, user = messages(t, {"x": "1"})
    assert (system.role, system.content, user.role, user.content) == ("system", "S", "user", "U 1")


def test_template_record_and_file_text_round_trip() -> None:
    t = load_template("screen/critic")
    assert t.names() == ("system", "user")
    assert {"task", "metric", "data_report", "parent", "child", "understanding", "criteria"} == t.declared
    again = parse_template(template_text(t), t.name, t.source)
    assert again == t
    changed = t.with_text("system", "New system.")
    assert changed.text("system") == "New system." and changed.names() == t.names()
    with pytest.raises(ConfigError, match="no '<!-- section: NAME -->' lines"):
        parse_template("just text", "x", "x.md")
    with pytest.raises(TemplateError, match="prompts/screen/nothing.md is missing"):
        load_template("screen/nothing")


def test_checker_names_the_file_and_the_fix() -> None:
    t = Template("f", "my.md", (("system", "S"), ("user", "{{a}} {{z}} [TAG]"), ("extra", "")))
    with pytest.raises(ConfigError) as exc:
        check_template(t, "the critic screener", ["a", "b"], ["[TAG]", "[OTHER]"])
    text = str(exc.value)
    assert text.startswith("prompt file my.md ")
    assert "section(s) extra that the critic screener never reads" in text
    assert "lacks the placeholder(s) {{b}} that the critic screener fills" in text
    assert "uses placeholder(s) {{z}} that the critic screener does not fill" in text
    assert "never mentions [OTHER]" in text
    with pytest.raises(ConfigError, match="lacks the section"):
        check_template(Template("f", "my.md", (("user", "{{a}}"),)), "x", ["a"])
    fine = Template("f", "my.md", (("system", "S"), ("user", "{{a}} [TAG]")))
    assert check_template(fine, "the critic screener", ["a"], ["[TAG]"]) is fine


def test_old_format_prompt_file_loads_with_a_warning_and_renders_as_before(tmp_path: Path) -> None:
    from verifyless.screen.critic import MARKERS, PLACEHOLDERS
    from verifyless.screen.prompt_file import load_prompt_file

    critic = load_template("screen/critic")
    old = tmp_path / "old.md"
    old.write_text(f"{critic.text('system')}\n<!-- user -->\n{critic.text('user')}\n", encoding="utf-8")
    with pytest.warns(FutureWarning, match=r"old\.md uses the old '<!-- user -->' format.*'<!-- section: user -->'"):
        template = load_prompt_file(old, "critic", PLACEHOLDERS, MARKERS)
    values = {p: f"<{p}>" for p in (*PLACEHOLDERS, *OPTIONAL)}
    assert messages(template, values) == messages(critic, values)
    new = tmp_path / "new.md"
    new.write_text(template_text(critic), encoding="utf-8")
    assert load_prompt_file(new, "critic", PLACEHOLDERS, MARKERS).sections == critic.sections


def test_a_variant_that_changes_its_placeholders_is_rejected_naming_the_file() -> None:
    from verifyless.offline.tune.doc import PromptDoc, parse_variants

    doc = PromptDoc.parse(load_template("screen/critic"))
    text = "<!-- section: Criteria you must cover | variant: lost -->\nNo criteria here.\n"
    with pytest.raises(ConfigError, match=r"v\.md variant 'lost' lacks the placeholder\(s\) \{\{criteria\}\}"):
        parse_variants(text, doc, where="v.md")
    kept = parse_variants(text.replace("No criteria here.", "{{criteria}} first."), doc, where="v.md")
    assert [v.name for v in kept] == ["lost"]


def test_the_freestyle_critic_prompt_is_package_data_the_critic_renders_without_a_rubric() -> None:
    """App. H's freestyle critic: the critic's inputs and verdict tags, but no criterion-by-criterion rubric."""
    from critic_data_rows import row

    from verifyless.critic_data import critic_messages

    example = row("keyword", "p0", "c0", "improve", label5="BigWin", delta=0.5)
    soft, free = critic_messages(example), critic_messages(example, "freestyle")
    assert soft != free and "Go through the criteria one at a time" in soft[-1]["content"]
    text = free[-1]["content"]
    assert "Go through the criteria" not in text and "no checklist" in text
    assert "[IMPROVEMENT]" in text and "[WINTIER]" in text and "model capacity" in text  # the inputs are all shown
