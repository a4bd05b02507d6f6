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


def _repo(root, other: str) -> None:
    """A repository of one commit: ``hpcbench/core.py`` and a file ``other`` outside the package."""
    (root / "hpcbench").mkdir()
    (root / "hpcbench" / "core.py").write_text("X = 1\n")
    (root / other).write_text("first\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "one")


def test_a_commit_or_a_change_to_the_package_changes_the_identity_and_a_doc_change_does_not(tmp_path):
    _repo(tmp_path, "README.md")
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


def test_a_commit_that_leaves_the_package_alone_is_the_same_code_and_one_that_changes_it_is_not(tmp_path):
    _repo(tmp_path, "jobs.yaml")
    first = code_identity(tmp_path)
    assert len(first["package_tree"]) == 40
    (tmp_path / "jobs.yaml").write_text("figures: {a: 1}\n")        # a manifest-only commit
    _git(tmp_path, "commit", "-qam", "manifest")
    manifest = code_identity(tmp_path)
    assert manifest["commit"] != first["commit"] and manifest["package_tree"] == first["package_tree"]
    assert differences(first, manifest, tmp_path) == []
    legacy = {k: v for k, v in first.items() if k != "package_tree"}  # a ledger line from before the key
    assert differences(legacy, manifest, tmp_path) == []
    (tmp_path / "hpcbench" / "core.py").write_text("X = 2\n")
    _git(tmp_path, "commit", "-qam", "package")
    package = code_identity(tmp_path)
    assert package["package_tree"] != first["package_tree"]
    assert differences(first, package, tmp_path) == [f"commit {short(first)} -> {short(package)}"]
    assert differences(legacy, package, tmp_path) == [f"commit {short(first)} -> {short(package)}"]
    unknown = {**legacy, "commit": "0" * 40}                          # a commit this clone does not hold
    assert differences(unknown, manifest, tmp_path) == [f"commit 0000000 -> {short(manifest)}"]
    edited = dict(manifest, package_diff_sha256="ab" * 32)           # same tree, uncommitted package change
    assert differences(first, edited, tmp_path) != []
