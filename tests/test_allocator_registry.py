"""An allocator with options is one file and one registry line: a toy one, registered from ``tests/``, is
named in a pipeline config with its own section, validated there, and run with that section's options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np
import toy_allocator  # noqa: F401  (registers 'front')
from hpcbench.allocation import Instance, allocate
from hpcbench.pipeline.config import ConfigError, load_config
from hpcbench.runtime.config import section_options

out = {{}}
cfg = load_config("jobs/configs/pipeline-quick.yaml", {{"allocators": "[even, {{name: front, first: 3}}]"}})
section = cfg.allocators[1]
inst = Instance(np.ones(9), np.ones(9), np.ones(9), [1.0, 1.0, 1.0], [100.0, 100.0, 100.0])
alloc = allocate(section.name, inst, **section_options(section))
out["options"] = section_options(section)
out["layers"] = alloc.layers_per_stage.tolist()
out["default"] = section_options(load_config("jobs/configs/pipeline-quick.yaml", {{"allocators": "[front]"}}).allocators[0])
for bad in ("[{{name: front, first: 0}}]", "[{{name: front, frist: 2}}]", "[frnt]"):
    try:
        load_config("jobs/configs/pipeline-quick.yaml", {{"allocators": bad}})
        out[bad] = "accepted"
    except ConfigError as exc:
        out[bad] = str(exc)
print(json.dumps(out))
"""


def test_a_toy_allocator_with_options_registered_from_the_tests_runs_from_a_config_section():
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=str(TESTS))], capture_output=True, text=True,
                          timeout=300, cwd=TESTS.parent)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["options"] == {"first": 3} and out["default"] == {"first": 1}
    assert out["layers"] == [3, 3, 3]
    assert "allocators.0.front.first" in out["[{name: front, first: 0}]"]
    assert "allocators.0.front.frist" in out["[{name: front, frist: 2}]"]
    assert "unknown allocator 'frnt'; registered: even, sky-dynamic, sky-milp, optimal, front, adaptive" \
        in out["[frnt]"]


def test_the_registered_allocators_take_their_options_from_their_sections():
    """The registry's own entries: each section's defaults are its function's, so a bare name runs as before."""
    import inspect

    from hpcbench.allocation import ALLOCATORS

    for name, entry in ALLOCATORS.items():
        params = inspect.signature(entry.allocate).parameters
        for key, field in entry.Config.model_fields.items():
            assert key in params, (name, key)
            assert field.default == params[key].default, (name, key)
