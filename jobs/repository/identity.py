"""Which repository a folder belongs to, read from git's own files (no ``git`` process).

A Claude Code project is the git repository, not the folder (issue 49): the worktrees of one
repository and its clones share one memory. The repository's identity is

1. its remote's URL, normalised (scheme, credentials, port and ``.git`` dropped, host lowercased,
   ``git@host:a/b`` the same as ``https://host/a/b``): ``origin``, else the first remote by name;
   a remote that is a folder on this machine (a local clone) is followed to that repository's own
   identity, so a clone of a local repository shares its memory;
2. else its common folder (what ``git rev-parse --git-common-dir`` prints, resolved), which every
   worktree of it shares.

Read from the files because the SessionStart hook pays for every millisecond, and because running
``git`` in a folder a session opened runs that folder's configuration (``core.fsmonitor`` and the
like); only the remote URLs, ``HEAD`` and refs are read here, never executed. ``GIT_DIR``,
``GIT_CEILING_DIRECTORIES`` and ``includeIf`` are not followed (a module below the settings reads no
environment): a folder git would find differently keeps the scope found here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).*)$")  # git@host:a/b (not C:\ or a path)
_SECTION = re.compile(r'^\s*\[\s*(?P<name>[A-Za-z0-9.-]+)(?:\s+"(?P<sub>(?:[^"\\]|\\.)*)")?\s*\]\s*(?P<rest>.*)$')
_HEX = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
FOLLOW_LOCAL = 3  # a local remote of a local remote ...: followed this many times at most


@dataclass(frozen=True)
class Place:
    """Where a folder is in git: its repository's identity and name, the worktree's top folder, the
    branch checked out (None when detached) and the HEAD commit (None in a repository without one)."""

    identity: str
    name: str
    worktree: str
    git_dir: str
    common_dir: str
    branch: str | None
    head: str | None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read()
    except OSError:
        return None


def find_git_dir(folder: str) -> tuple[str, str] | None:
    """(worktree top, git folder) of the repository ``folder`` is in, walking up as git does; None
    outside git (or in a folder that does not exist on this machine)."""
    here = os.path.abspath(folder)
    if not os.path.isdir(here):
        return None
    while True:
        dot_git = os.path.join(here, ".git")
        if os.path.isdir(dot_git) and os.path.isfile(os.path.join(dot_git, "HEAD")):
            return here, dot_git
        if os.path.isfile(dot_git):  # a worktree or a submodule: "gitdir: <path>"
            text = (_read(dot_git) or "").strip()
            if text.startswith("gitdir:"):
                target = os.path.join(here, text[len("gitdir:") :].strip())
                if os.path.isfile(os.path.join(target, "HEAD")):
                    return here, os.path.normpath(target)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def common_dir(git_dir: str) -> str:
    """The folder all worktrees share (``commondir`` names it relative to a worktree's git folder)."""
    pointer = (_read(os.path.join(git_dir, "commondir")) or "").strip()
    return os.path.realpath(os.path.join(git_dir, pointer) if pointer else git_dir)


def remote_urls(common: str) -> dict[str, str]:
    """The ``url`` of each ``[remote "<name>"]`` of the repository's config (the first one of each)."""
    urls: dict[str, str] = {}
    section: tuple[str, str | None] = ("", None)
    for raw in (_read(os.path.join(common, "config")) or "").splitlines():
        line = raw.strip()
        match = _SECTION.match(line)
        if match:
            section = (match["name"].lower(), match["sub"])
            line = match["rest"].strip()
        if not line or line[0] in "#;" or section[0] != "remote" or section[1] is None:
            continue
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "url":
            value = re.split(r"\s[#;]", value, maxsplit=1)[0].strip()
            urls.setdefault(section[1], value.strip('"'))
    return urls


def normalise_url(url: str) -> str | None:
    """``host/owner/name`` of a remote URL (None for a local path): credentials, port, scheme and
    ``.git`` dropped, the host lowercased; ``git@host:a/b`` and ``https://host/a/b`` are the same."""
    url = url.strip()
    if not url or url.startswith(("/", ".", "~", "file:")) or re.match(r"^[A-Za-z]:[\\/]", url):
        return None
    if "://" in url:
        parts = urlsplit(url)
        host, path = (parts.hostname or "").lower(), parts.path
    else:
        match = _SCP.match(url)
        if not match:
            return None
        host, path = match["host"].lower(), match["path"]
    path = path.strip("/")
    path = path[: -len(".git")] if path.endswith(".git") else path
    path = path.rstrip("/")
    return f"{host}/{path}" if host and path else None


def _local_remote(url: str, base: str) -> str | None:
    """The folder a local remote URL names (``/x``, ``file:///x``, ``../x``), resolved; None if not one."""
    if url.startswith("file://"):
        url = urlsplit(url).path
    elif url.startswith("file:"):
        url = url[len("file:") :]
    if normalise_url(url) is not None:
        return None
    return os.path.realpath(os.path.join(base, os.path.expanduser(url)))


def _bare_or_worktree(folder: str) -> str | None:
    """The git folder of a repository at ``folder`` (its ``.git``, or ``folder`` itself if bare)."""
    if os.path.isfile(os.path.join(folder, "HEAD")) and os.path.isdir(os.path.join(folder, "objects")):
        return folder
    found = find_git_dir(folder)
    return found[1] if found and os.path.realpath(found[0]) == os.path.realpath(folder) else None


def identity_of(common: str, base: str, depth: int = FOLLOW_LOCAL) -> str:
    """The repository's identity: its normalised remote URL, else its common folder."""
    urls = remote_urls(common)
    for name in sorted(urls, key=lambda n: (n != "origin", n)):
        url = urls[name]
        remote = normalise_url(url)
        if remote:
            return remote
        local = _local_remote(url, base)
        other = _bare_or_worktree(local) if local and depth > 0 else None
        if other and common_dir(other) != common:
            return identity_of(common_dir(other), local or base, depth - 1)
    return common


def repository_name(identity: str) -> str:
    """A readable name: the remote's last part, or the folder holding the common folder."""
    if identity.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", identity):
        folder = identity.rstrip("/\\")
        base = os.path.basename(folder)
        if base == ".git":
            base = os.path.basename(os.path.dirname(folder))
        return base[: -len(".git")] if base.endswith(".git") else base
    return identity.rstrip("/").rsplit("/", 1)[-1]


def read_ref(common: str, git_dir: str, ref: str) -> str | None:
    """The commit ``ref`` (``refs/heads/x``) points at: a loose ref, else packed-refs; None if none."""
    for folder in (git_dir, common):
        text = (_read(os.path.join(folder, *ref.split("/"))) or "").strip()
        if _HEX.match(text):
            return text
    for line in (_read(os.path.join(common, "packed-refs")) or "").splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _HEX.match(sha):
            return sha
    return None


def head_of(git_dir: str, common: str) -> tuple[str | None, str | None]:
    """(branch, commit) of a worktree's HEAD: branch None when detached, commit None before the first."""
    text = (_read(os.path.join(git_dir, "HEAD")) or "").strip()
    if text.startswith("ref:"):
        ref = text[len("ref:") :].strip()
        branch = ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else None
        return branch, read_ref(common, git_dir, ref)
    return None, text if _HEX.match(text) else None


def place_of(folder: str) -> Place | None:
    """Where ``folder`` is in git; None outside git (a folder not on this machine too)."""
    found = find_git_dir(folder)
    if found is None:
        return None
    top, git_dir = found
    common = common_dir(git_dir)
    identity = identity_of(common, top)
    branch, head = head_of(git_dir, common)
    return Place(identity, repository_name(identity), os.path.realpath(top), git_dir, common, branch, head)
