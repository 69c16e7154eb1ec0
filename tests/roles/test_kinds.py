"""Role kinds (issue 54, item 10): a task without an idea space is told to edit the file it has."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifyless.errors import ConfigError
from verifyless.roles.kinds import check_roles_fit
from verifyless.task import load_task

DATA_TASK = Path(__file__).parents[1] / "data_task"  # an OpenEvolve folder with a verifyless.yaml sidecar


def test_an_openevolve_folder_without_an_idea_space_is_pointed_at_its_sidecar(tmp_path):
    folder = tmp_path / "oe"
    folder.mkdir()
    for name in ("initial_program.py", "evaluator.py"):
        (folder / name).write_text((DATA_TASK / name).read_text())
    with pytest.raises(ConfigError) as info:
        check_roles_fit("space", load_task(folder))
    assert f"add an idea_space to its verifyless.yaml ({folder.resolve()})" in str(info.value)
    assert "task.yaml" not in str(info.value)
