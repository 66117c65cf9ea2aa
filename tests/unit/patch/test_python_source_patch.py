"""Unit tests of the text edit behind gpufleet.llm_server.python_source_patch.

Inputs are small Python sources written here to cover layouts the real SGLang files do not have
(inline dicts, missing trailing comma, CRLF, unicode, parenthesised values, unpacking); the real
releases are exercised in tests/integration/patch.
"""

import ast

import pytest

from ansible_collections.gpufleet.llm_server.plugins.module_utils.python_source_patch import (
    PatchError,
    SymbolNotFound,
    ensure_entries,
    read_entries,
    resolve_target,
    run_patch,
    validate_entries,
)

ENTRY = [{"key": "12", "value": "[6, 8]"}]


def patched(source, symbol="X", entries=None):
    result = ensure_entries(source, symbol, ENTRY if entries is None else entries)
    return result["source"].decode("utf-8"), result


def patched_text(source, symbol="X", entries=None):
    return patched(source, symbol, entries)[0]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("X = {}\n", "X = {12: [6, 8]}\n"),
        ("X = {1: 2}\n", "X = {1: 2, 12: [6, 8]}\n"),
        ("X = {1: 2,}\n", "X = {1: 2, 12: [6, 8],}\n"),
        ("X = {1: (2)}\n", "X = {1: (2), 12: [6, 8]}\n"),
        ("X = {\n    1: 2\n}\n", "X = {\n    1: 2,\n    12: [6, 8]\n}\n"),
        ("X = {\n    1: 2,  # two, really\n}\n", "X = {\n    1: 2,  # two, really\n    12: [6, 8],\n}\n"),
        ("X = {\n    1: 2,\n    **Y,\n}\n", "X = {\n    1: 2,\n    **Y,\n    12: [6, 8],\n}\n"),
        ("X = {1: 2,\n     3: 4\n}\n", "X = {1: 2,\n     3: 4,\n     12: [6, 8]\n}\n"),
        ("X: dict[int, list] = {1: 2}\n", "X: dict[int, list] = {1: 2, 12: [6, 8]}\n"),
        ("X = {\r\n    1: 2,\r\n}\r\n", "X = {\r\n    1: 2,\r\n    12: [6, 8],\r\n}\r\n"),
        ("# é\nX = {'é': 1,\n  }\n", "# é\nX = {'é': 1,\n     12: [6, 8],\n  }\n"),
        ("X = {'é': 'ü', 'ß': 2}  # ü\n", "X = {'é': 'ü', 'ß': 2, 12: [6, 8]}  # ü\n"),
    ],
)
def test_insert_keeps_the_layout(source, expected):
    text, result = patched(source)
    assert text == expected
    assert result["changed"] and result["added"] == [{"key": "12", "value": "[6, 8]"}]
    compile(text, "x.py", "exec")


def test_class_attribute_and_comments_elsewhere_untouched():
    source = (
        "# header, with a comma\n"
        "X = {9: [1]}  # module-level dict with the same attribute name is not the target\n"
        "class C:\n"
        "    \"\"\"Doc.\"\"\"\n\n"
        "    # Mapping: capability -> sizes\n"
        "    _W = {\n"
        "        9: [4, 6, 8],\n"
        "        10: [6, 8],\n"
        "    }\n\n"
        "    def f(self):\n"
        "        return self._W[9]\n"
    )
    text, result = patched(source, "C._W", [{"key": "12", "value_from_key": "10"}])
    assert text == source.replace("        10: [6, 8],\n", "        10: [6, 8],\n        12: [6, 8],\n")
    assert result["added"] == [{"key": "12", "value": "[6, 8]"}]


def test_value_from_key_copies_multiline_text_with_comments():
    source = "MiB = 1\nS = {\n    10: {\n        2: 64 * MiB,  # 64 MB\n    },\n}\n"
    text = patched_text(source, "S", [{"key": "12", "value_from_key": "10"}])
    assert text == source.replace("    },\n}", "    },\n    12: {\n        2: 64 * MiB,  # 64 MB\n    },\n}")
    namespace = {}
    exec(text, namespace)  # noqa: S102 - our own test source
    assert namespace["S"][12] == namespace["S"][10] == {2: 64}


def test_second_run_changes_nothing_and_reports_existing():
    first = patched_text("X = {\n    10: [6, 8],\n}\n", entries=[{"key": "12", "value_from_key": "10"}])
    again = ensure_entries(first, "X", [{"key": "12", "value_from_key": "10"}])
    assert again["changed"] is False
    assert again["source"] == first.encode()
    assert again["existing"] == [{"key": "12", "value": "[6, 8]", "wanted": "[6, 8]", "matches": True}]


def test_existing_key_with_other_value_is_left_alone():
    source = "X = {12: [8]}\n"
    result = ensure_entries(source, "X", ENTRY)
    assert not result["changed"] and result["source"] == source.encode()
    assert result["existing"][0]["matches"] is False and result["existing"][0]["value"] == "[8]"


def test_keys_compare_by_value_not_text():
    assert not ensure_entries("X = {0xC: 1}\n", "X", ENTRY)["changed"]
    # a string '12' is a different key from the integer 12
    text, result = patched("X = {'12': 1}\n")
    assert result["changed"] and text == "X = {'12': 1, 12: [6, 8]}\n"


def test_several_entries_in_order():
    text, result = patched("X = {\n    1: 1,\n}\n", entries=[{"key": "2", "value": "2"}, {"key": "3", "value": "3"}])
    assert text == "X = {\n    1: 1,\n    2: 2,\n    3: 3,\n}\n"
    assert [e["key"] for e in result["added"]] == ["2", "3"]


def test_renamed_symbol_fails_naming_what_exists():
    with pytest.raises(SymbolNotFound) as err:
        ensure_entries("SYMM_MEM_SIZES = {9: 1}\nOTHER = {}\n", "TORCH_SYMM_MEM_SIZES", ENTRY, "f.py")
    message = str(err.value)
    assert "f.py" in message and "TORCH_SYMM_MEM_SIZES" in message and "SYMM_MEM_SIZES (line 1)" in message


def test_missing_class_fails_naming_the_class():
    with pytest.raises(SymbolNotFound, match=r"no top-level class C\b.*D\._W \(line 2\)"):
        ensure_entries("class D:\n    _W = {}\n", "C._W", ENTRY, "f.py")


@pytest.mark.parametrize(
    "source, symbol, message",
    [
        ("X = dict(a=1)\n", "X", "assigned a Call, not a dict literal"),
        ("X = {}\nX = {}\n", "X", "assigned 2 times"),
        ("X = {\n", "X", "does not parse"),
        ("X = {}\n", "X.Y.Z", "must be NAME or Class.NAME"),
    ],
)
def test_unpatchable_targets(source, symbol, message):
    with pytest.raises(PatchError, match=message):
        ensure_entries(source, symbol, ENTRY)


@pytest.mark.parametrize(
    "entries, message",
    [
        ([{"key": "12"}], "exactly one of value or value_from_key"),
        ([{"key": "12", "value": "1", "value_from_key": "10"}], "exactly one of"),
        ([{"key": "12", "value": "[6, 8"}], "not a valid Python expression"),
        ([{"key": "", "value": "1"}], "non-empty Python expression"),
        ([{"key": "12", "value": "1"}, {"key": "0xc", "value": "2"}], "repeats key"),
        ([{"key": "12", "value": "1", "extra": 1}], "unknown field"),
        ("12", "must be a list"),
    ],
)
def test_bad_entries_are_refused(entries, message):
    with pytest.raises(PatchError, match=message):
        validate_entries(entries)


def test_value_from_missing_key_fails():
    with pytest.raises(PatchError, match="has no key 10 to copy"):
        ensure_entries("X = {9: 1}\n", "X", [{"key": "12", "value_from_key": "10"}])


def test_integer_keys_given_as_numbers_are_accepted():
    assert validate_entries([{"key": 12, "value_from_key": 10}]) == [{"key": "12", "value": None, "value_from_key": "10"}]


def test_read_entries_reports_literal_keys():
    entries = read_entries("X = {9: 1, 'a': 2, K: 3, **Y}\n", "X")
    assert [(e["key"], e["is_literal"], e["literal_key"]) for e in entries] == [
        ("9", True, 9), ("'a'", True, "a"), ("K", False, None), ("**Y", False, None)]


def test_resolve_target_takes_the_first_that_exists():
    files = {"a.py": b"OLD = {}\n", "b.py": b"class C:\n    W = {}\n"}
    read = files.__getitem__
    exists = files.__contains__
    assert resolve_target([("a.py", "NEW"), ("a.py", "OLD")], read, exists)[:3] == (1, "a.py", "OLD")
    assert resolve_target([("gone.py", "X"), ("b.py", "C.W")], read, exists)[:3] == (1, "b.py", "C.W")
    with pytest.raises(SymbolNotFound) as err:
        resolve_target([("a.py", "NEW"), ("gone.py", "X")], read, exists)
    assert "a.py: symbol NEW not found" in str(err.value) and "gone.py: file does not exist" in str(err.value)


def test_result_always_compiles_and_parses_back():
    text = patched_text("X = {\n    1: [\n        2,\n    ],\n}\n", entries=[{"key": "12", "value": "{\n    1: 2,\n}"}])
    tree = ast.parse(text)
    assert ast.literal_eval(tree.body[0].value)[12] == {1: 2}


def patch_params(**extra):
    params = {"path": "/src/t.py", "symbol": "X", "alternatives": [], "entries": ENTRY, "follow_imports": False,
              "copies": []}
    params.update(extra)
    return params


def test_run_patch_returns_the_new_text_and_writes_nothing():
    files = {"/src/t.py": b"X = {1: 2}\n"}
    patch = run_patch(patch_params(), read_file=files.__getitem__, exists=files.__contains__)
    assert patch["result"]["changed"] is True
    assert patch["result"]["msg"] == "added key(s) 12 to X in /src/t.py"
    assert patch["before"] == b"X = {1: 2}\n"
    assert patch["after"] == b"X = {1: 2, 12: [6, 8]}\n"
    assert patch["diff"]["after"] == "X = {1: 2, 12: [6, 8]}\n"
    assert patch["warnings"] == []
    assert files == {"/src/t.py": b"X = {1: 2}\n"}


def test_run_patch_returns_a_mismatched_existing_key_as_a_warning():
    files = {"/src/t.py": b"X = {12: [4]}\n"}
    patch = run_patch(patch_params(), read_file=files.__getitem__, exists=files.__contains__)
    assert patch["result"]["changed"] is False
    assert patch["diff"] is None
    assert patch["after"] == patch["before"]
    assert patch["warnings"] == ["/src/t.py: X already has key 12 upstream with value [4] (wanted [6, 8]); left unchanged."]
