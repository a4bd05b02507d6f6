"""The code that makes a results file: commit, uncommitted package changes, versions that change numbers.

``hpcbench reproduce`` records this *code identity* beside each run's recipe
(:meth:`hpcbench.reproduce.plan.Run.recipe`, the manifest's settings) in
its ledger. A results file whose ledger line names another identity was made
by other code: it is run again, unless ``--reuse`` keeps it (and the claims
computed from it say so).

Two identities are the same code when the committed package agrees (the
same commit, or commits whose ``hpcbench/`` trees are the same git tree
object: a commit that changed only documents, manifests or tests makes the
same results), the hash of the package's uncommitted changes (``git diff
HEAD`` of ``hpcbench/`` and its untracked files) agrees, and every version in
:data:`VERSIONED` agrees. ``dirty`` (any tracked file of the tree modified)
is recorded, not compared: a changed document does not change a result.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
from importlib import metadata
from pathlib import Path

__all__ = ["VERSIONED", "code_identity", "differences", "package_tree", "short"]

#: distributions whose versions change numbers (Python and the MPI library are added to them)
VERSIONED = ("torch", "numpy", "mpi4py")

#: the keys two identities must agree on to be the same code
_COMPARED = ("commit", "package_diff_sha256", "python", *VERSIONED, "mpi_library")


def _git(root: Path, *args: str) -> bytes | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _package_diff(root: Path) -> str:
    """SHA-256 of ``git diff HEAD`` of the package plus its untracked files' paths and bytes (``""``: none)."""
    diff = _git(root, "diff", "HEAD", "--binary", "--", "hpcbench")
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z", "--", "hpcbench")
    if diff is None or untracked is None:
        return ""
    h = hashlib.sha256(diff)
    extra = False
    for name in sorted(n for n in untracked.decode().split("\0") if n):
        path = root / name
        if path.is_file() and path.suffix != ".pyc":
            h.update(name.encode() + b"\0" + path.read_bytes())
            extra = True
    return h.hexdigest() if diff or extra else ""


def package_tree(commit: str, root: Path | None = None) -> str:
    """The git tree object of ``hpcbench/`` at ``commit`` (40 hex digits; ``""`` when git does not know it).

    Parameters
    ----------
    commit : str
        A commit of the repository in ``root``.
    root : pathlib.Path, optional
        The repository (default: this hpcbench checkout).
    """
    if not commit:
        return ""
    tree = _git(root or _checkout(), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}:hpcbench")
    text = tree.decode().strip() if tree else ""
    return text if len(text) == 40 else ""


def _checkout() -> Path:
    import hpcbench

    return Path(hpcbench.__file__).resolve().parent.parent


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def code_identity(root: Path | None = None) -> dict:
    """The identity of the code in ``root`` (default: this hpcbench checkout) and of its environment.

    Parameters
    ----------
    root : pathlib.Path, optional
        The repository whose ``hpcbench/`` package runs.

    Returns
    -------
    dict
        ``commit`` (40 hex digits, ``""`` outside git), ``package_tree``
        (:func:`package_tree` of the commit), ``dirty`` (bool),
        ``package_diff_sha256`` (``""`` when the package has no uncommitted
        change), ``python``, ``torch``, ``numpy``, ``mpi4py`` (installed
        versions, read without importing them) and ``mpi_library`` (first line
        of ``MPI_Get_library_version``).
    """
    from hpcbench.reproduce.machine import mpi_library

    if root is None:
        root = _checkout()
    head = _git(root, "rev-parse", "HEAD")
    commit = head.decode().strip() if head else ""
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    commit = commit if len(commit) == 40 else ""
    return {"commit": commit, "package_tree": package_tree(commit, root), "dirty": bool(status and status.strip()),
            "package_diff_sha256": _package_diff(root) if commit else "", "python": platform.python_version(),
            **{name: _version(name) for name in VERSIONED}, "mpi_library": mpi_library()}


def short(identity: dict | None) -> str:
    """``740279c``, ``740279c+diff 1a2b3c4d`` or ``unknown code`` (a ledger line from before identities)."""
    if not identity:
        return "unknown code"
    commit = (identity.get("commit") or "no commit")[:7]
    diff = identity.get("package_diff_sha256") or ""
    return commit + (f"+diff {diff[:8]}" if diff else "")


def differences(recorded: dict | None, current: dict, root: Path | None = None) -> list[str]:
    """What differs from ``recorded`` to ``current`` (``[]``: the same code).

    Parameters
    ----------
    recorded, current : dict or None
        :func:`code_identity` results; ``recorded`` may come from a ledger
        line written before ``package_tree`` was recorded, whose tree is
        then looked up from its commit in ``root``.
    root : pathlib.Path, optional
        The repository that knows the commits (default: this checkout).

    Returns
    -------
    list of str
        ``commit 740279c -> 1a2b3c4``, ``torch 2.12.0 -> 2.13.0``, ...; one
        entry ``no code identity recorded`` when ``recorded`` is empty.
    """
    if not recorded:
        return ["no code identity recorded"]
    out = []
    committed_same = recorded.get("commit") == current.get("commit")
    if not committed_same and recorded.get("commit") and current.get("commit"):
        before = recorded.get("package_tree") or package_tree(recorded["commit"], root)
        now = current.get("package_tree") or package_tree(current["commit"], root)
        committed_same = bool(before) and before == now
    if not committed_same or recorded.get("package_diff_sha256") != current.get("package_diff_sha256"):
        out.append(f"commit {short(recorded)} -> {short(current)}")
    for key in _COMPARED[2:]:
        if recorded.get(key) != current.get(key):
            out.append(f"{key} {recorded.get(key)} -> {current.get(key)}")
    return out
