"""Tool calls a server left in a reply's text (``tool_calls_in_text``)."""

from __future__ import annotations

import json

from verifyless.model.wire import tool_calls_in_text

NAMES = {"python", "bash", "submit_findings"}


def test_each_tagged_call_is_read_in_order_and_removed_from_the_text() -> None:
    text = (
        "Two pilots.\n<tool_call>\n"
        '{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call>\n'
        '<tool_call>{"name": "bash", "arguments": "{\\"cmd\\": \\"ls\\"}"}</tool_call>\nDone.'
    )
    rest, calls = tool_calls_in_text(text, NAMES)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("text-call-0", "python", {"code": "print(1)"}),
        ("text-call-1", "bash", {"cmd": "ls"}),
    ]
    assert rest == "Two pilots.\nDone."


def test_a_last_call_cut_off_before_its_closing_tag_is_read() -> None:
    rest, calls = tool_calls_in_text('<tool_call>\n{"name": "submit_findings", "arguments": {}}\n', NAMES)
    assert [c.name for c in calls] == ["submit_findings"] and rest == ""


def test_blocks_that_are_not_calls_of_an_offered_tool_leave_the_text_unchanged() -> None:
    for text in (
        "no tags at all",
        '<tool_call>{"name": "rm", "arguments": {}}</tool_call>',  # not offered
        "<tool_call>{not json}</tool_call>",
        '<tool_call>{"name": "python", "arguments": [1, 2]}</tool_call>',  # arguments not an object
        '<tool_call>["python"]</tool_call>',
    ):
        assert tool_calls_in_text(text, NAMES) == (text, ())
