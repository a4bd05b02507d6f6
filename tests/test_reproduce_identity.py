"""The code identity ``hpcbench reproduce`` records with each run: commit, package diff, versions."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from hpcbench.reproduce.identity import code_identity, differences, short

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def test_a_commit_or_a_change_to_the_package_changes_the_identity_and_a_doc_change_does_not(tmp_path):
    (tmp_path / "hpcbench").mkdir()
    (tmp_path / "hpcbench" / "core.py").write_text("X = 1\n")
    (tmp_path / "README.md").write_text("docs\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "one")
    clean = code_identity(tmp_path)
    assert len(clean["commit"]) == 40 and not clean["dirty"] and clean["package_diff_sha256"] == ""
    assert clean["python"] and clean["numpy"] and clean["mpi_library"]
    assert differences(clean, code_identity(tmp_path)) == []
    (tmp_path / "README.md").write_text("other docs\n")              # the tree is dirty, the package is not
    docs = code_identity(tmp_path)
    assert docs["dirty"] and differences(clean, docs) == []
    (tmp_path / "hpcbench" / "core.py").write_text("X = 2\n")        # an uncommitted change to the package
    edited = code_identity(tmp_path)
    assert edited["package_diff_sha256"] and short(edited) == f"{clean['commit'][:7]}+diff " \
                                                                f"{edited['package_diff_sha256'][:8]}"
    assert differences(clean, edited) == [f"commit {short(clean)} -> {short(edited)}"]
    (tmp_path / "hpcbench" / "new.py").write_text("Y = 1\n")         # an untracked module counts too
    assert code_identity(tmp_path)["package_diff_sha256"] != edited["package_diff_sha256"]
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "two")
    committed = code_identity(tmp_path)
    assert committed["commit"] != clean["commit"] and committed["package_diff_sha256"] == ""
    assert differences(clean, committed)[0].startswith(f"commit {clean['commit'][:7]} -> ")
    assert differences(committed, {**committed, "torch": "0.0"}) == [f"torch {committed['torch']} -> 0.0"]
    assert differences(None, committed) == ["no code identity recorded"] and short(None) == "unknown code"
