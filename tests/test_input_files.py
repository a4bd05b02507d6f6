"""Every input file is a regular file of bounded size before it is read (issue 35 part 3).

docs/architecture.md, "Data-safety guarantees", input bounds: a device (``/dev/zero``,
``/dev/urandom``), a FIFO or a file beyond the bound of its kind is an input error naming the key
or flag and the file, stating the bound, before anything reads it. Each kind of input is tried
with all three: configs, FedScale job files, traces, reproduce manifests, checkpoints and HDF5
results files (``results``, ``analysis``, resume). Oversized files are sparse (no disk used).

Every call runs under an alarm: a reader that opens a FIFO blocks for ever, and reading
``/dev/zero`` never ends, so a regression fails here in a bounded time (imports included) instead of hanging the suite.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager

import pytest

from hpcbench.runtime.bounded import INPUT_BOUNDS, InputFileError, check_input_file, read_input
from hpcbench.runtime.errors import InputError
from mpitools import ROOT

DIGITS = str(ROOT / "jobs" / "configs" / "digits.yaml")


@contextmanager
def _deadline(seconds: int = 90):
    def fail(*_):
        raise TimeoutError(f"the reader did not return within {seconds} s (it blocked or read without bound)")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _hostile(tmp_path, how: str, kind: str, suffix: str) -> str:
    """A path to a hostile input: the zero device, a FIFO, or a sparse file one byte over ``kind``'s bound."""
    if how == "zero":
        return "/dev/zero"
    path = tmp_path / f"input{suffix}"
    if how == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as fh:
            fh.truncate(INPUT_BOUNDS[kind] + 1)
    return str(path)


def _expect(exc: BaseException, path: str, kind: str, how: str, key: str) -> None:
    text = str(exc)
    assert isinstance(exc, InputError), type(exc)
    assert key in text and path in text, text
    assert str(INPUT_BOUNDS[kind]) in text, f"the bound is not stated: {text}"
    assert {"zero": "character device", "fifo": "FIFO", "big": "more than the bound"}[how] in text, text


def _read_config(path):
    from hpcbench.fl.config import FLConfig
    from hpcbench.runtime.config import load_config

    return load_config(FLConfig, path)


def _read_fedscale(path):
    from hpcbench.fl.fedscale_conf import read_fedscale_conf

    return read_fedscale_conf(path)


def _read_trace(path):
    from hpcbench.traces import load_trace

    return load_trace("mobiperf", path)


def _read_pickle_trace(path):
    from hpcbench.traces import load_trace

    return load_trace("fedscale-capacity", path)


def _read_manifest(path):
    from hpcbench.reproduce.manifest import load_manifest

    return load_manifest(path)


def _read_checkpoint(path):
    from hpcbench.fl.checkpoint import load_checkpoint

    return load_checkpoint(path)


def _read_results(path):
    from hpcbench.results import read_attrs

    return read_attrs(path)


def _read_results_table(path):
    from hpcbench.results import read_table

    return read_table(path, "rounds")


def _read_status(path):
    from hpcbench.results.status import file_status

    return file_status(path)


READERS = [  # (reader, bound kind, suffix, key or flag the message names)
    (_read_config, "config", ".yaml", "config file"),
    (_read_fedscale, "fedscale", ".yml", "--fedscale-conf"),
    (_read_trace, "trace", ".json", "trace file"),
    (_read_pickle_trace, "trace", ".pkl", "trace file"),
    (_read_manifest, "manifest", ".yaml", "manifest"),
    (_read_checkpoint, "checkpoint", ".ckpt", "--resume"),
    (_read_results, "results", ".h5", "results file"),
    (_read_results_table, "results", ".h5", "results file"),
    (_read_status, "results", ".h5", "results file"),
]


@pytest.mark.parametrize("how", ["zero", "fifo", "big"])
@pytest.mark.parametrize("reader, kind, suffix, key", READERS, ids=[r[0].__name__[6:] for r in READERS])
def test_every_input_kind_refuses_devices_fifos_and_oversized_files(tmp_path, reader, kind, suffix, key, how):
    path = _hostile(tmp_path, how, kind, suffix)
    with _deadline(), pytest.raises(InputError) as info:
        reader(path)
    _expect(info.value, path, kind, how, key)


@pytest.mark.parametrize("argv, key", [
    (["{path}", "--rounds", "1"], "config file"),
    (["--fedscale-conf", "{path}", "--rounds", "1"], "--fedscale-conf"),
    ([DIGITS, "--rounds", "1", "--traces.device.path", "{path}"], "traces.device"),
    ([DIGITS, "--rounds", "1", "--traces.device.format", "fedscale-capacity", "--traces.device.path", "{path}"],
     "traces.device"),
])
@pytest.mark.parametrize("how", ["zero", "fifo", "big"])
def test_fl_exits_2_naming_the_flag_the_file_and_the_bound(tmp_path, capsys, argv, key, how):
    from hpcbench.fl.job import FLJob
    from hpcbench.lifecycle import run

    kind = "config" if key == "config file" else "fedscale" if key == "--fedscale-conf" else "trace"
    path = _hostile(tmp_path, how, kind, ".yaml")
    out = tmp_path / "o.h5"
    with _deadline():
        status = run(FLJob, [a.format(path=path) for a in argv] + ["--progress", "false", "--output", str(out)])
    err = capsys.readouterr().err
    assert status == 2, err
    assert key in err and path in err and str(INPUT_BOUNDS[kind]) in err, err
    assert "Traceback" not in err and not out.exists()


def test_urandom_as_a_trace_is_refused_before_it_is_read(tmp_path, capsys):
    """The issue's ``--traces.device.path /dev/urandom`` read 5.5 GB and hung."""
    from hpcbench.fl.job import FLJob
    from hpcbench.lifecycle import run

    with _deadline():
        status = run(FLJob, [DIGITS, "--rounds", "1", "--progress", "false", "--traces.device.path", "/dev/urandom",
                             "--output", str(tmp_path / "o.h5")])
    assert status == 2
    assert "'/dev/urandom' is a character device" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["zero", "fifo", "big"])
def test_results_command_exits_2_on_hostile_files(tmp_path, capsys, how):
    from hpcbench.cli import main

    path = _hostile(tmp_path, how, "results", ".h5")
    with _deadline():
        status = main(["results", "show", path])
    err = capsys.readouterr().err
    assert status == 2 and path in err and "Traceback" not in err, err


def test_gzip_bomb_is_bounded_by_its_decompressed_size(tmp_path, monkeypatch):
    import gzip

    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b" " * (1 << 20)))
    monkeypatch.setitem(INPUT_BOUNDS, "trace", 1 << 16)
    with pytest.raises(InputFileError, match="decompresses to more than the bound of 65536 bytes"):
        read_input(path, "--trace", "trace")


def test_a_file_grown_after_the_check_is_cut_at_the_bound(tmp_path, monkeypatch):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"a" * 100)
    monkeypatch.setitem(INPUT_BOUNDS, "config", 1000)
    assert read_input(path, "k", "config") == b"a" * 100
    real = os.fstat

    def grown(fd):  # the check on the descriptor passes, then the file is longer than it said
        st = real(fd)
        path.write_bytes(b"a" * 5000)
        return st

    monkeypatch.setattr(os, "fstat", grown)
    with pytest.raises(InputFileError, match="grew beyond the bound"):
        read_input(path, "k", "config")


def test_check_input_file_names_missing_directories_and_unknown_kinds(tmp_path):
    with pytest.raises(InputFileError, match="--x: results file .* does not exist"):
        check_input_file(tmp_path / "nope.h5", "--x", "results")
    with pytest.raises(InputFileError, match="is a directory"):
        check_input_file(tmp_path, "--x", "results")
    with pytest.raises(ValueError, match="unknown input kind"):
        check_input_file(tmp_path, "--x", "bogus")


def test_the_input_bound_rule_is_documented_with_the_bounds_in_force():
    """docs/architecture.md, "Data-safety guarantees", states the rule and each bound of INPUT_BOUNDS."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc[doc.index("## Data-safety guarantees"):]
    section = " ".join(section[:section.index("\n## ", 3)].split())
    assert "**Input bounds**" in section and "`tests/test_input_files.py`" in section
    for kind, text in (("config", "1 MiB for job files and manifests"), ("manifest", "1 MiB for job files"),
                       ("fedscale", "1 MiB for job files"), ("trace", "1 GiB for traces"),
                       ("data", "1 GiB for traces and data"), ("checkpoint", "16 GiB for checkpoints"),
                       ("results", "64 GiB for results files")):
        number, unit = text.split()[:2]
        assert INPUT_BOUNDS[kind] == int(number) << {"MiB": 20, "GiB": 30}[unit], kind
        assert text in section, text
