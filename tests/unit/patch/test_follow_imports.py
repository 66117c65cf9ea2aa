"""Unit tests of python_source_patch's follow_imports: find the dict a module really reads.

The files are small trees written here (tmp_path), laid out like SGLang's package
(`pkg/srt/comm/reader.py` importing from `pkg/srt/comm/utils.py`), to cover the binding forms the
real releases do not have (aliases, relative imports, re-exports, conditional and double bindings,
star imports, non-literals); tests/integration/patch runs the real releases and the moved-table
layouts built from them.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.python_source_patch import (
    PatchError,
    SymbolNotFound,
    module_bindings,
    resolve_read_target,
    resolve_target,
    stale_copies,
)

TABLE = "T = {\n    9: {2: 1},\n    10: {2: 2},\n}\n"


def tree(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def resolve(tmp_path, reader="pkg/srt/comm/reader.py", symbol="T"):
    index, reader_path, reader_symbol, path, resolved, chain, _data = resolve_read_target(
        [(str(tmp_path / reader), symbol)], read, os.path.isfile)
    return os.path.relpath(path, tmp_path), resolved, chain


def test_local_definition_is_the_target(tmp_path):
    tree(tmp_path, {"pkg/srt/comm/reader.py": "import os\n" + TABLE})
    assert resolve(tmp_path)[:2] == ("pkg/srt/comm/reader.py", "T")


@pytest.mark.parametrize("importer", [
    "from pkg.srt.comm.utils import T\n",
    "from pkg.srt.comm.utils import (\n    X,\n    T,\n)\n",
    "from .utils import T\n",
    "from ..comm.utils import T\n",
    "from pkg.srt.comm.utils import OLD as T\n",
])
def test_imports_are_followed(tmp_path, importer):
    utils = TABLE.replace("T = ", "OLD = ") if " as T" in importer else TABLE
    tree(tmp_path, {"pkg/srt/comm/reader.py": importer, "pkg/srt/comm/utils.py": "X = 1\n" + utils})
    path, symbol, chain = resolve(tmp_path)
    assert path == "pkg/srt/comm/utils.py"
    assert symbol == ("OLD" if " as T" in importer else "T")
    assert len(chain) == 1 and "reader.py line 1 imports" in chain[0] and chain[0].endswith("utils.py")


def test_reexport_through_a_package_init(tmp_path):
    tree(tmp_path, {"pkg/srt/comm/reader.py": "from pkg.srt.tables import T\n",
                    "pkg/srt/tables/__init__.py": "from .sizes import T\n",
                    "pkg/srt/tables/sizes.py": TABLE})
    path, _symbol, chain = resolve(tmp_path)
    assert path == "pkg/srt/tables/sizes.py" and len(chain) == 2


def test_class_attribute_of_an_imported_class(tmp_path):
    tree(tmp_path, {"pkg/srt/comm/reader.py": "from pkg.srt.comm.base import C\n",
                    "pkg/srt/comm/base.py": "class C:\n    T = {10: [6, 8]}\n"})
    assert resolve(tmp_path, symbol="C.T")[:2] == ("pkg/srt/comm/base.py", "C.T")


def test_name_not_bound_lets_the_next_candidate_win(tmp_path):
    tree(tmp_path, {"pkg/a.py": "X = 1\n", "pkg/b.py": TABLE})
    found = resolve_read_target([(str(tmp_path / "pkg/a.py"), "T"), (str(tmp_path / "pkg/b.py"), "T")],
                                read, os.path.isfile)
    assert found[0] == 1 and found[3].endswith("pkg/b.py")


@pytest.mark.parametrize("files, words", [
    ({"pkg/srt/comm/reader.py": "from pkg.srt.comm.utils import T\n" + TABLE},
     ["binds T 2 times", "line 1: imported", "line 2: a dict literal"]),
    ({"pkg/srt/comm/reader.py": "try:\n    from pkg.srt.comm.utils import T\nexcept ImportError:\n" +
      "    T = {}\n"}, ["binds T 2 times"]),
    ({"pkg/srt/comm/reader.py": "import sys\nif sys.version_info > (3,):\n    T = {10: 1}\n"},
     ["only conditionally", "line 3"]),
    ({"pkg/srt/comm/reader.py": "from pkg.srt.comm.utils import T\n",
      "pkg/srt/comm/utils.py": "def build():\n    return {}\nT = build()\n"},
     ["reader.py reads T from", "utils.py line 3: assigned a Call, not a dict literal"]),
    ({"pkg/srt/comm/reader.py": "from pkg.srt.comm.gone import T\n"},
     ["reader.py imports from pkg.srt.comm.gone", "gone.py nor", "moved"]),
    ({"pkg/srt/comm/reader.py": "from torch.distributed import T\n"},
     ["imports from torch.distributed", "not part of the package tree"]),
    ({"pkg/srt/comm/reader.py": "from pkg.srt.comm.utils import T\n",
      "pkg/srt/comm/utils.py": "from pkg.srt.comm.other import *\n"},
     ["utils.py does not bind it", "star import", "renamed or moved"]),
    ({"pkg/srt/comm/reader.py": "from pkg.srt.comm.utils import T\n",
      "pkg/srt/comm/utils.py": "from pkg.srt.comm.reader import T\n"},
     ["import cycle"]),
    ({"pkg/srt/comm/reader.py": "import pkg.srt.comm.utils as T\n"}, ["bound to the module pkg.srt.comm.utils"]),
])
def test_what_cannot_be_followed_is_refused(tmp_path, files, words):
    tree(tmp_path, files)
    with pytest.raises(PatchError) as caught:
        resolve(tmp_path)
    assert not isinstance(caught.value, SymbolNotFound)
    for word in words:
        assert word in str(caught.value), str(caught.value)


def test_module_bindings_sees_nested_blocks_but_not_functions(tmp_path):
    import ast
    source = "def f():\n    T = 1\nclass K:\n    T = 2\nwith open('x') as T:\n    pass\nfor T in []:\n    pass\n"
    kinds = [(line, kind, conditional) for line, kind, _d, conditional in module_bindings(ast.parse(source), "T")]
    assert kinds == [(7, "value", False)]


def test_stale_copies_are_listed_with_their_keys(tmp_path):
    tree(tmp_path, {"pkg/srt/comm/reader.py": TABLE, "pkg/srt/comm/utils.py": "import os\n" + TABLE,
                    "pkg/srt/comm/other.py": "X = 1\n"})
    copies = stale_copies([(str(tmp_path / "pkg/srt/comm/utils.py"), None), (str(tmp_path / "pkg/srt/comm/other.py"), None),
                           (str(tmp_path / "pkg/srt/comm/missing.py"), None), (str(tmp_path / "pkg/srt/comm/reader.py"), None)],
                          str(tmp_path / "pkg/srt/comm/reader.py"), "T", read, os.path.isfile)
    assert copies == [{"path": str(tmp_path / "pkg/srt/comm/utils.py"), "symbol": "T", "line": 2, "keys": [9, 10]}]


def test_not_found_message_has_single_full_stops(tmp_path):
    tree(tmp_path, {"a.py": "OTHER = {1: 2}\n"})
    for resolver in (resolve_target, resolve_read_target):
        with pytest.raises(SymbolNotFound) as caught:
            resolver([(str(tmp_path / "a.py"), "T"), (str(tmp_path / "b.py"), "T")], read, os.path.isfile)
        message = str(caught.value)
        assert ".." not in message, message
        assert "Tried: " in message and "b.py: file does not exist (looked for T). The dict was renamed" in message
