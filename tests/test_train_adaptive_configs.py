"""Every jobs/configs/train-adaptive-*.yaml loads and is covered by jobs/train.sbatch with an --ntasks that runs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "jobs" / "configs").glob("train-adaptive-*.yaml"))


def _ntasks() -> dict[str, int]:
    """The config -> --ntasks pairs of the template's comment."""
    text = (ROOT / "jobs" / "train.sbatch").read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"(train-adaptive-[\w-]+\.yaml) (\d+)", text)}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_adaptive_config_loads_and_the_template_covers_it(path):
    from hpcbench.train.config import load_config

    cfg = load_config(str(path))
    n = _ntasks().get(path.name)
    assert n is not None, f"jobs/train.sbatch does not name {path.name} with its --ntasks"
    el = cfg.elastic
    if el is not None:
        assert n >= max([el.initial(n), *(el.schedule or {}).values()])
    assert all(s.rank < n for s in cfg.link.slow)
