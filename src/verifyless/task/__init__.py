"""Tasks: the frozen ``Task`` record and the loaders that build it from folders.

``load_task(path_or_builtin_name)`` loads one folder with the first task kind that detects it (native
``task.yaml``, an OpenEvolve folder, an MLE-bench competition; ``task.kind`` states the contract and
``kind_of(task)`` finds a task's kind); ``discover_tasks(dir)`` loads every task folder in a directory, keeping
errors as values; ``builtin_tasks_dir()`` is where the shipped tasks live. See ``docs/design/task-format.md``.
"""

from verifyless.task import loader
from verifyless.task.base import Anchors, Band, IdeaOption, IdeaSpace, Limits, Metric, Task

# The loader imports verifyless.program, which imports task.base; loading it
# lazily keeps `import verifyless.program` free of an import cycle.
_LOADER_NAMES = tuple(loader.__all__)


def __getattr__(name: str):
    if name in _LOADER_NAMES:
        return getattr(loader, name)
    raise AttributeError(f"module 'verifyless.task' has no attribute {name!r}")


__all__ = ["Anchors", "Band", "IdeaOption", "IdeaSpace", "Limits", "Metric", "Task", *loader.__all__]
