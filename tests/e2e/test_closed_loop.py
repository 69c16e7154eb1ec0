"""bench/closed_loop.py --quick: runs -> data -> SFT -> GRPO -> critic and critic-ttl runs, one adapter hash (~30 s)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "closed_loop.py"


@pytest.mark.slow  # bench/closed_loop.py end to end (~30 s); its parts run in train/test_sft.py (SFT, GRPO) and screen/test_reward.py (a trained critic in a run)
def test_the_closed_loop_hands_one_adapter_from_training_to_the_screening_runs(tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("closed_loop", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--quick", "--out", str(tmp_path / "loop")])
    hashes = result["hashes"]
    assert set(hashes) == {"training", "critic run", "critic-ttl run", "critic-ttl origin"}
    assert result["same"] and hashes["training"].startswith("adapter@")
    assert result["sources"] == ["collect-grpo", "collect-sft", "run"]  # an ordinary search run feeds the data too
    assert set(result["bench"]) == {"base", "SFT", "SFT+GRPO"} and all(
        int(r["n"]) > 0 for r in result["bench"].values()
    )
    ttl = result["screened"]["critic-ttl"]
    chain = [a for a in ttl["adapters"] if a["role"] == "critic-ttl"]
    assert chain and chain[0]["origin"] == hashes["training"] and chain[0]["version"] >= 1  # versions chain from it
    assert result["screened"]["critic"]["audited"].n > 0  # the screened run's audit joined screenings to outcomes
