"""Which code wrote a fidelity JSON (results/fidelity/README.md: each JSON is produced by the code at the commit it
names). Standard library only.

A check names the commit of its export's build (`git_commit`, from SPEEDRUN_REVISION on a copied tree, which has
no .git) and records `check_code`, a digest of its own scripts, which a later test recomputes from the files at
that commit: a check run from a tree that differs from the named commit then shows up. The check refuses to run
when it cannot name its commit or when its commit is not its export's.
"""
import hashlib
import os
import subprocess

# The scripts whose content decides a fidelity verdict, relative to the checkout's root.
CHECK_SCRIPTS = ("scripts/reference-check", "scripts/side-by-side")
CHECK_LIBRARY = "scripts/reference_lib"


class ProvenanceError(ValueError):
    pass


def digest(files):
    """sha256 over (path, content) pairs in path order: {relative path: bytes}."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path] + b"\0")
    return h.hexdigest()


def check_files(root):
    """The check's scripts as they are in the tree at `root`."""
    paths = list(CHECK_SCRIPTS)
    library = os.path.join(root, CHECK_LIBRARY)
    paths += [f"{CHECK_LIBRARY}/{n}" for n in sorted(os.listdir(library)) if n.endswith(".py")]
    out = {}
    for p in paths:
        with open(os.path.join(root, p), "rb") as f:
            out[p] = f.read()
    return out


def check_files_at(root, commit):
    """The check's scripts as they were at `commit` (git)."""
    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, check=True).stdout

    names = git("ls-tree", "--name-only", f"{commit}:{CHECK_LIBRARY}").decode().split()
    paths = list(CHECK_SCRIPTS) + [f"{CHECK_LIBRARY}/{n}" for n in names if n.endswith(".py")]
    return {p: git("show", f"{commit}:{p}") for p in paths}


def same_commit(a, b):
    """Abbreviated and full hashes of one commit agree on their common prefix (at least 7 digits)."""
    a, b = (a or "").lower(), (b or "").lower()
    n = min(len(a), len(b))
    return n >= 7 and a[:n] == b[:n]


def revision(root, environ):
    """The commit the check's code is at: SPEEDRUN_REVISION (a copied tree), else git's HEAD when the check's
    scripts have no uncommitted change; None when neither says."""
    named = environ.get("SPEEDRUN_REVISION")
    if named:
        return named
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", *CHECK_SCRIPTS, CHECK_LIBRARY],
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return None if dirty.stdout.strip() else head.stdout.strip()


def check_provenance(root, environ, export_commit):
    """{check_revision, check_code} for a check's JSON; ProvenanceError when the check cannot name its commit, or
    when the export it checks was built from another commit (`export_commit`, the manifest's git_commit; None for a
    check without an export)."""
    rev = revision(root, environ)
    if not rev:
        raise ProvenanceError("cannot name the commit of this code: set SPEEDRUN_REVISION=<commit> (a copied tree "
                              "has no .git) or commit the check's scripts")
    if export_commit is not None and not same_commit(rev, export_commit):
        raise ProvenanceError(f"the export was built at {export_commit}, this check's code is {rev}: export and "
                              "check with the code of one commit")
    return {"check_revision": rev, "check_code": digest(check_files(root))}
