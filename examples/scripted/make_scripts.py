"""Write `scripted:` model files that let every LLM role and screener run offline on a built-in task.

The implementer's replies are real bands rendered from the task's idea space,
so the scripted loop makes real, different, runnable programs; the other
roles get fixed, well-formed replies. Regenerate with:

    .venv/bin/python examples/scripted/make_scripts.py
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import yaml

from verifyless.node import Operator
from verifyless.program import extract
from verifyless.roles.base import ParentInfo, ProposeContext, RoleFailure
from verifyless.roles.space import space_roles
from verifyless.task import load_task

SUMMARY = (
    "The program reads the public training data from the data folder, builds the features described in its "
    "editable block, fits the model configured there with the listed hyperparameters, and writes predictions "
    "for the requested inputs into the output folder in the format the scorer expects. Preprocessing happens "
    "inside the fitted pipeline, so the same transformation is applied to every split. Randomness is fixed with "
    "explicit seeds, the number of threads is limited to one, and no file outside the given folders is read or "
    "written. The fixed parts of the file parse the command-line arguments, load the inputs and save the outputs; "
    "only the block between the markers differs from one candidate to the next. The code does not print "
    "intermediate results apart from short progress lines, and it stops with an error if an input file is missing."
)

BRIEF = """## Task understanding
Tabular or numeric prediction task with a single scalar metric; the program must keep its command-line
interface and write its outputs where the scorer looks for them. Runs are CPU-only, single-threaded, and must
finish well inside the wall-clock limit.

[CRITERIA]
1. Fit between the model family and the size and shape of the data.
2. Strength and appropriateness of regularisation.
3. Quality of preprocessing and feature construction.
4. Risk of overfitting the validation split.
5. Robustness: seeds, numerical stability, runtime margin.
"""

CRITIQUES = [
    "1. Model fit: child better.\n2. Regularisation: same.\nWeighting favours model fit.\n"
    "[IMPROVEMENT] improve --- a better suited model\n[WINTIER] medium --- solid but not dramatic",
    "1. Model fit: same.\n2. Preprocessing: child worse.\n"
    "[IMPROVEMENT] lose --- weaker preprocessing\n[WINTIER] NA --- not an improvement",
    "Mixed evidence across criteria.\n[IMPROVEMENT] tie --- no clear difference\n[WINTIER] NA --- tie",
    "**[IMPROVEMENT]** Improve --- stronger regularisation\n**[WINTIER]** small --- modest gain",
    "[IMPROVEMENT] improve --- better features\n[WINTIER] big --- large expected gain",
]


async def bands(task_name: str, count: int) -> list[str]:
    task = load_task(task_name)
    roles = space_roles(task, seed=0)
    parent = ParentInfo(id="root", program=task.baseline_program)
    ideas = await roles.proposer.propose(ProposeContext(task=task, parent=parent, operator=Operator.IMPROVE, seed=1), count)
    out = []
    for idea in ideas:
        if isinstance(idea, RoleFailure):
            continue
        impl = await roles.implementer.implement(task, parent, idea)
        if impl.ok:
            out.append(extract(impl.program, task.band))
    return out


def script_for(task_name: str, count: int = 24) -> dict:
    rendered = asyncio.run(bands(task_name, count))
    rng = random.Random(0)
    approaches = [f"## Approach\nChange the configuration of the model and its preprocessing (variant {i}): "
                  f"keep the interface, alter one or two choices that should lower the error." for i in range(count)]
    rng.shuffle(rendered)
    return {
        "mode": "rules",
        "rules": [
            {"role": "brief", "reply": BRIEF},
            {"role": "proposer", "replies": approaches, "repeat": True},
            {"role": "implementer", "replies": [f"```python\n{b}```" for b in rendered], "repeat": True},
            {"role": "repair", "replies": [f"```python\n{b}```" for b in rendered], "repeat": True},
            {"role": "summarizer", "reply": SUMMARY},
            {"role": "critic", "replies": CRITIQUES, "repeat": True},
            {"role": "judge", "replies": ["Candidate A looks stronger on the criteria.\n[CHOICE] A --- better fit",
                                          "[CHOICE] B --- more robust"], "repeat": True},
            {"role": "arbiter", "reply": "[CHOICE] 1 --- the majority reasoning is sound"},
            {"role": "final-judge", "reply": "[CHOICE] A --- best overall"},
            {"role": "agentic-pilot", "replies": [
                {"tool_calls": [{"name": "python", "arguments": {"code": "import os\nprint(sorted(os.listdir('.')))"}}]},
                {"tool_calls": [{"name": "submit_findings", "arguments": {"findings": "Both candidates run; no difference found in a quick check."}}]},
            ], "repeat": True},
            {"role": "agentic-feedback", "reply": "[ENOUGH] the evidence suffices"},
            {"role": "agentic-final", "reply": "[CHOICE] 1 --- first candidate"},
        ],
    }


def main(argv: list[str]) -> None:
    here = Path(__file__).parent
    for name in argv or ["diabetes", "sunspots", "moons_torch", "circle_packing"]:
        path = here / f"{name}.yaml"
        path.write_text(yaml.safe_dump(script_for(name), sort_keys=False, width=120))
        print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
