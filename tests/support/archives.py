"""Unpack tar archives (PyPI sdists, the SGLang test inputs) safely on every Python the tests run on.

tarfile's extraction filters (PEP 706) came in CPython 3.11.4. Debian 12's own python3.11 is 3.11.2 (with
Debian's patches, still no `tarfile.data_filter`), and the test venv may be built from it: it is the
distribution's PGO+LTO build, measurably faster for the ~2,000 Ansible and pytest processes of a run than an
unoptimized interpreter (issue 36, docs/testing.md). `extract_tar` refuses, on every Python and before anything
is written, what the "data" filter refuses (and absolute names, which that filter would strip); where the filter is
missing it also drops setuid bits and owners as the filter does.
"""

from __future__ import annotations

import os
import pathlib
import tarfile
from collections.abc import Iterable


def extract_tar(tf: tarfile.TarFile, dest: str | os.PathLike, members: Iterable[tarfile.TarInfo] | None = None) -> None:
    """Extract MEMBERS (default: all) of the open archive TF into DEST with the "data" filter's guarantees."""
    chosen = list(tf.getmembers() if members is None else members)
    root = pathlib.Path(dest).resolve()
    for member in chosen:
        _refuse_unsafe(member, root)
    if hasattr(tarfile, "data_filter"):
        tf.extractall(dest, members=chosen, filter="data")
        return
    for member in chosen:
        member.mode = (member.mode or 0o644) & 0o755
        member.uid = member.gid = 0
        member.uname = member.gname = ""
    tf.extractall(dest, members=chosen)


def _refuse_unsafe(member: tarfile.TarInfo, root: pathlib.Path) -> None:
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise tarfile.TarError(f"{member.name}: not a file, directory or link; refused")
    target = (root / member.name).resolve()
    if os.path.isabs(member.name) or not target.is_relative_to(root):
        raise tarfile.TarError(f"{member.name}: outside {root}; refused")
    if member.issym() or member.islnk():
        base = target.parent if member.issym() else root
        link = (base / member.linkname).resolve()
        if os.path.isabs(member.linkname) or not link.is_relative_to(root):
            raise tarfile.TarError(f"{member.name}: links to {member.linkname}, outside {root}; refused")
