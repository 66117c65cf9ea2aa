"""tests/support/archives.py: tar extraction with the "data" filter's guarantees on Pythons without it.

Each test runs twice: with this Python's tarfile as it is (its own "data" filter on 3.11.4+), and with
`tarfile.data_filter` hidden, the path Debian 12's python3.11 (3.11.2) takes.
The archives are built in the test with tarfile itself; the hostile members are the classic ones PEP 706
names (a path climbing out, an absolute path, a link out of the folder, a device node).
"""

from __future__ import annotations

import io
import tarfile

import pytest

from support.archives import extract_tar


@pytest.fixture(params=["this Python's tarfile", "without tarfile.data_filter"])
def filter_kind(request, monkeypatch):
    if request.param != "this Python's tarfile":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def make_tar(path, *members):
    with tarfile.open(path, "w:gz") as tf:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            data = b""
            if kind == "file":
                data = extra.encode()
                info.size = len(data)
                info.mode = 0o4755
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, extra
            elif kind == "dev":
                info.type = tarfile.CHRTYPE
            tf.addfile(info, io.BytesIO(data))
    return path


def test_ordinary_members_are_extracted_without_setuid(tmp_path, filter_kind):
    archive = make_tar(tmp_path / "ok.tar.gz", ("pkg/a.py", "file", "print(1)\n"), ("pkg/link.py", "sym", "a.py"))
    dest = tmp_path / "out"
    with tarfile.open(archive) as tf:
        extract_tar(tf, dest)
    assert (dest / "pkg" / "a.py").read_text() == "print(1)\n"
    assert (dest / "pkg" / "link.py").resolve() == (dest / "pkg" / "a.py").resolve()
    assert not (dest / "pkg" / "a.py").stat().st_mode & 0o7000


def test_chosen_members_only(tmp_path, filter_kind):
    archive = make_tar(tmp_path / "two.tar.gz", ("a.txt", "file", "a"), ("b.txt", "file", "b"))
    dest = tmp_path / "out"
    with tarfile.open(archive) as tf:
        extract_tar(tf, dest, [tf.getmember("b.txt")])
    assert sorted(p.name for p in dest.iterdir()) == ["b.txt"]


@pytest.mark.parametrize("hostile", [
    ("../escape.txt", "file", "x"),
    ("{tmp_path}/absolute-member.txt", "file", "x"),
    ("pkg/out", "sym", "../../outside"),
    ("pkg/abs", "sym", "/etc/passwd"),
    ("pkg/tty", "dev", None),
], ids=["dotdot", "absolute", "link-out", "link-absolute", "device"])
def test_hostile_members_are_refused_before_anything_is_written(tmp_path, filter_kind, hostile):
    name, kind, extra = hostile
    archive = make_tar(tmp_path / "bad.tar.gz", ("pkg/a.py", "file", "ok"), (name.format(tmp_path=tmp_path), kind, extra))
    dest = tmp_path / "out"
    dest.mkdir()
    with tarfile.open(archive) as tf, pytest.raises(tarfile.TarError):
        extract_tar(tf, dest)
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "escape.txt").exists()
    assert not (tmp_path / "absolute-member.txt").exists()
    assert not (tmp_path.parent / "escape.txt").exists()
