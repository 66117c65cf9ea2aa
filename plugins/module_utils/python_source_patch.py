# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ensure entries in a dict literal of Python source, editing the text minimally.

The target is a dict literal assigned to a module-level name (``NAME``) or to a class attribute
(``Class.NAME``) of a top-level class. It is located through the AST; the edit inserts text right
after the dict's last entry, so formatting, comments and every other byte of the file stay as they
were. Standard library only: this runs on the managed host's Python (3.11+).
"""

from __future__ import annotations

import ast
import difflib

from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import maybe_mark

__all__ = [
    "PatchError",
    "SymbolNotFound",
    "ensure_entries",
    "find_dict",
    "read_entries",
    "validate_entries",
]


class PatchError(Exception):
    """Bad input or a target that cannot be patched; the message says what and how to fix it."""


class SymbolNotFound(PatchError):
    """The named dict does not exist in the file (renamed or moved upstream)."""


def _normalise(node):
    """A comparable form of an expression node: the literal value when it has one, else the AST dump."""
    try:
        return ("literal", ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ("ast", ast.dump(node, annotate_fields=False, include_attributes=False))


def _parse_expr(text, what):
    if not isinstance(text, str) or not text.strip():
        raise PatchError("%s must be a non-empty Python expression given as a string, got %r." % (what, text))
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise PatchError("%s %r is not a valid Python expression (%s). Quote it as Python source, "
                         "e.g. '12' for an integer key or '[6, 8]' for a list." % (what, text, exc.msg))


def validate_entries(entries):
    """Check the entries list (before touching any file); return it normalised.

    Each entry: ``key`` (Python expression text, e.g. ``'12'``) and exactly one of ``value``
    (expression text, e.g. ``'{2: 64 * MiB}'``) or ``value_from_key`` (expression text naming
    another key of the same dict whose value text is copied).
    """
    if not isinstance(entries, list):
        raise PatchError("entries must be a list of {key, value} or {key, value_from_key}, got %r." % (entries,))
    out = []
    seen = set()
    for index, entry in enumerate(entries):
        where = "entries[%d]" % index
        if not isinstance(entry, dict):
            raise PatchError("%s must be a dict with key and value (or value_from_key), got %r." % (where, entry))
        unknown = sorted(set(entry) - {"key", "value", "value_from_key"})
        if unknown:
            raise PatchError("%s has unknown field(s) %s; allowed: key, value, value_from_key." % (where, unknown))
        key = entry.get("key")
        if isinstance(key, int) and not isinstance(key, bool):
            key = str(key)
        key_node = _parse_expr(key, "%s.key" % where)
        value = entry.get("value")
        source_key = entry.get("value_from_key")
        if isinstance(source_key, int) and not isinstance(source_key, bool):
            source_key = str(source_key)
        if (value is None) == (source_key is None):
            raise PatchError("%s (key %s) needs exactly one of value or value_from_key, got value=%r, "
                             "value_from_key=%r." % (where, key, value, source_key))
        if value is not None:
            _parse_expr(value, "%s.value" % where)
        else:
            _parse_expr(source_key, "%s.value_from_key" % where)
        norm = _normalise(key_node)
        if norm in seen:
            raise PatchError("%s repeats key %s; give each key once." % (where, key))
        seen.add(norm)
        out.append({"key": key.strip(), "value": value.strip() if value is not None else None,
                    "value_from_key": source_key.strip() if source_key is not None else None})
    return out


def _assigned_names(stmt):
    """Names bound by a plain or annotated assignment statement, with its value node."""
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)], stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return [stmt.target.id], stmt.value
    return [], None


def _dict_symbols(tree):
    """Every dict literal bound at module level or as a top-level class attribute: {symbol: lineno}."""
    found = {}
    for stmt in tree.body:
        names, value = _assigned_names(stmt)
        for name in names:
            if isinstance(value, ast.Dict):
                found.setdefault(name, stmt.lineno)
        if isinstance(stmt, ast.ClassDef):
            for inner in stmt.body:
                names, value = _assigned_names(inner)
                for name in names:
                    if isinstance(value, ast.Dict):
                        found.setdefault("%s.%s" % (stmt.name, name), inner.lineno)
    return found


def _describe_found(tree, symbol):
    symbols = _dict_symbols(tree)
    if not symbols:
        return "no module-level or class-level dict literal at all"
    close = difflib.get_close_matches(symbol, list(symbols), n=3, cutoff=0.5)
    listing = ", ".join("%s (line %d)" % (s, symbols[s]) for s in (close or sorted(symbols, key=symbols.get)[:8]))
    return ("similar dict literals: " if close else "dict literals: ") + listing


def find_dict(tree, symbol, filename="<source>"):
    """Return the ast.Dict bound to SYMBOL (``NAME`` or ``Class.NAME``) in a parsed module.

    Raises SymbolNotFound (naming the file, the symbol and what the file holds instead) when the
    name is not bound, and PatchError when it is bound to something other than one dict literal.
    """
    parts = symbol.split(".") if isinstance(symbol, str) else []
    if len(parts) not in (1, 2) or not all(p.isidentifier() for p in parts):
        raise PatchError("symbol %r must be NAME or Class.NAME (Python identifiers)." % (symbol,))
    body = tree.body
    if len(parts) == 2:
        classes = [s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == parts[0]]
        if not classes:
            raise SymbolNotFound("%s: symbol %s not found: no top-level class %s; found instead %s." % (
                filename, symbol, parts[0], _describe_found(tree, symbol)))
        body = classes[-1].body
    name = parts[-1]
    bindings = []
    for stmt in body:
        names, value = _assigned_names(stmt)
        if name in names:
            bindings.append((stmt, value))
    if not bindings:
        raise SymbolNotFound("%s: symbol %s not found (renamed or moved upstream?); found instead %s." % (
            filename, symbol, _describe_found(tree, symbol)))
    if len(bindings) > 1:
        raise PatchError("%s: symbol %s is assigned %d times (lines %s); cannot tell which one to patch." % (
            filename, symbol, len(bindings), ", ".join(str(s.lineno) for s, _v in bindings)))
    stmt, value = bindings[0]
    if not isinstance(value, ast.Dict):
        raise PatchError("%s: symbol %s (line %d) is assigned a %s, not a dict literal; the patch data no "
                         "longer fits this file." % (filename, symbol, stmt.lineno, type(value).__name__))
    return value


class _Source:
    """Source bytes with (lineno, byte col) → absolute offset conversion (ast columns are UTF-8 bytes)."""

    def __init__(self, data):
        self.data = data
        self.starts = [0]
        for line in data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno, col):
        return self.starts[lineno - 1] + col

    def segment(self, node):
        return self.data[self.offset(node.lineno, node.col_offset):self.offset(node.end_lineno, node.end_col_offset)]


def _newline(data):
    return b"\r\n" if b"\r\n" in data else b"\n"


def _scan_gap(data, start, close):
    """Scan the text between the last value's end and the closing brace.

    The gap holds only whitespace, comments, closing parentheses of a parenthesised value and at
    most one comma. Returns (value_end, comma_end): the offset past the value including its
    parentheses, and the offset just past the trailing comma (None when there is none).
    """
    value_end, comma_end, i = start, None, start
    while i < close:
        char = data[i:i + 1]
        if char in (b" ", b"\t", b"\r", b"\n", b"\\", b"\f"):
            i += 1
        elif char == b"#":
            newline = data.find(b"\n", i, close)
            i = close if newline == -1 else newline
        elif char == b")":
            i += 1
            value_end = i
        elif char == b",":
            comma_end = i + 1
            break
        else:
            raise PatchError("unexpected %r after the dict's last entry; cannot place a new entry safely." % char)
    return value_end, comma_end


def _insert_entry(data, dict_node, key_text, value_text):
    """Return DATA with ``key: value`` appended as the dict's last entry, in the dict's own style."""
    src = _Source(data)
    pair = key_text.encode("utf-8") + b": " + value_text.encode("utf-8")
    open_brace = src.offset(dict_node.lineno, dict_node.col_offset)
    close = src.offset(dict_node.end_lineno, dict_node.end_col_offset) - 1  # the '}'
    if not dict_node.values:
        return data[:open_brace + 1] + pair + data[open_brace + 1:]
    last_value = dict_node.values[-1]
    value_end, comma_end = _scan_gap(data, src.offset(last_value.end_lineno, last_value.end_col_offset), close)
    if dict_node.end_lineno == last_value.end_lineno:
        # closing brace on the last entry's line: continue the line
        if comma_end is not None:
            return data[:comma_end] + b" " + pair + b"," + data[comma_end:]
        return data[:value_end] + b", " + pair + data[value_end:]
    # one entry per line: a new line indented like the last entry's key
    last_key = dict_node.keys[-1]
    anchor_node = last_key if last_key is not None else last_value
    line_start = src.offset(anchor_node.lineno, 0)
    column = anchor_node.col_offset - (2 if last_key is None else 0)  # '**' of an unpacking
    indent = data[line_start:line_start + max(column, 0)]
    if indent.strip(b" \t"):
        indent = b" " * max(column, 0)  # several entries share that line: align by column
    newline = _newline(data)
    if comma_end is None:
        data = data[:value_end] + b"," + data[value_end:]
        anchor, close = value_end + 1, close + 1
    else:
        anchor = comma_end
    line_end = data.find(b"\n", anchor, close)
    if line_end == -1:
        line_end = close
    elif data[line_end - 1:line_end] == b"\r":
        line_end -= 1
    entry = newline + indent + pair + (b"," if comma_end is not None else b"")
    return data[:line_end] + entry + data[line_end:]


def read_entries(source, symbol, filename="<source>"):
    """List the dict's entries in file order.

    Each item: ``key`` and ``value`` (source text), ``is_literal`` and ``literal_key`` (the key's
    value when it is a literal, e.g. the integer 12).
    """
    data = source.encode("utf-8") if isinstance(source, str) else source
    tree = _parse_module(data, filename)
    node = find_dict(tree, symbol, filename)
    src = _Source(data)
    out = []
    for key, value in zip(node.keys, node.values):
        if key is None:
            out.append({"key": "**" + src.segment(value).decode("utf-8"), "value": None, "literal_key": None,
                        "is_literal": False})
            continue
        kind, norm = _normalise(key)
        out.append({"key": src.segment(key).decode("utf-8"), "value": src.segment(value).decode("utf-8"),
                    "literal_key": norm if kind == "literal" else None, "is_literal": kind == "literal"})
    return out


def _parse_module(data, filename):
    try:
        return ast.parse(data, filename=filename)
    except SyntaxError as exc:
        raise PatchError("%s does not parse as Python (%s, line %s); it cannot be patched safely." % (
            filename, exc.msg, exc.lineno))


def _find_key(node, key_node):
    wanted = _normalise(key_node)
    for index, existing in enumerate(node.keys):
        if existing is not None and _normalise(existing) == wanted:
            return index
    return None


def ensure_entries(source, symbol, entries, filename="<source>"):
    """Ensure ENTRIES exist in the dict literal SYMBOL of SOURCE (bytes or str).

    Returns a dict: ``source`` (new bytes, identical object content when nothing changed),
    ``changed``, ``added`` (entries inserted, with the value text used) and ``existing`` (entries
    already present, with the value text found and whether it equals the wanted value). Keys
    already present are never touched. The result is compiled before it is returned.
    """
    entries = validate_entries(entries)
    data = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    original = data
    tree = _parse_module(data, filename)
    find_dict(tree, symbol, filename)
    added, existing = [], []
    for entry in entries:
        tree = _parse_module(data, filename)
        node = find_dict(tree, symbol, filename)
        src = _Source(data)
        key_node = _parse_expr(entry["key"], "key")
        if entry["value"] is not None:
            wanted_text = entry["value"]
        else:
            source_index = _find_key(node, _parse_expr(entry["value_from_key"], "value_from_key"))
            if source_index is None:
                raise PatchError("%s: %s has no key %s to copy the value of key %s from (keys: %s); set value "
                                 "explicitly in the patch data." % (
                                     filename, symbol, entry["value_from_key"], entry["key"],
                                     ", ".join(src.segment(k).decode("utf-8") for k in node.keys if k is not None)
                                     or "none"))
            wanted_text = src.segment(node.values[source_index]).decode("utf-8")
        index = _find_key(node, key_node)
        if index is not None:
            found_text = src.segment(node.values[index]).decode("utf-8")
            same = _normalise(node.values[index]) == _normalise(_parse_expr(wanted_text, "value"))
            existing.append({"key": entry["key"], "value": found_text, "wanted": wanted_text, "matches": same})
            continue
        data = _insert_entry(data, node, entry["key"], wanted_text)
        added.append({"key": entry["key"], "value": wanted_text})
    if data != original:
        try:
            compile(data, filename, "exec", dont_inherit=True)
        except SyntaxError as exc:  # a bug here must never reach the file
            raise PatchError("%s: the patched text does not compile (%s, line %s); file left unchanged." % (
                filename, exc.msg, exc.lineno))
        tree = _parse_module(data, filename)
        node = find_dict(tree, symbol, filename)
        for entry in added:
            if _find_key(node, _parse_expr(entry["key"], "key")) is None:
                raise PatchError("%s: key %s is missing after the edit; file left unchanged." % (filename, entry["key"]))
    return {"source": data, "changed": data != original, "added": added, "existing": existing}


def _literal_keys(entries):
    """Keys as plain values where they are simple literals (12 stays 12), else as source text."""
    return [e["literal_key"] if e["is_literal"] and isinstance(e["literal_key"], (bool, int, float, str, type(None)))
            else e["key"] for e in entries]


def resolve_target(candidates, read_file, exists):
    """Pick the first candidate (path, symbol) whose file exists and binds the symbol.

    READ_FILE(path) returns bytes, EXISTS(path) a bool. Returns (index, path, symbol, data).
    Raises SymbolNotFound listing every candidate and what was found instead when none fits; a
    candidate that binds the symbol to something unpatchable raises PatchError at once.
    """
    notes = []
    for index, (path, symbol) in enumerate(candidates):
        if not exists(path):
            notes.append("%s: file does not exist (looked for %s)" % (path, symbol))
            continue
        data = read_file(path)
        tree = _parse_module(data, path)
        try:
            find_dict(tree, symbol, path)
        except SymbolNotFound as exc:
            notes.append(str(exc))
            continue
        return index, path, symbol, data
    raise SymbolNotFound("No candidate dict found, nothing was changed. Tried: %s. The dict was renamed or "
                         "moved upstream: update the patch data (symbol/path/alternatives) to the new name." % (
                             " | ".join(notes)))


def run_patch(module, params):
    """The python_source_patch module's work, given an AnsibleModule (for I/O, check and diff mode)."""
    import os
    import tempfile

    entries = validate_entries([{k: v for k, v in e.items() if v is not None} for e in params["entries"]])
    candidates = [(params["path"], params["symbol"])]
    for alt in params["alternatives"]:
        candidates.append((alt.get("path") or params["path"], alt["symbol"]))

    def read_file(path):
        with open(path, "rb") as handle:
            return handle.read()

    index, path, symbol, data = resolve_target(candidates, read_file, os.path.isfile)
    outcome = ensure_entries(data, symbol, entries, path)
    new = outcome["source"]
    result = {
        "changed": outcome["changed"],
        "path": path,
        "symbol": symbol,
        "alternative": index - 1 if index else None,
        "added": outcome["added"],
        "existing": outcome["existing"],
    }
    mismatched = [e for e in outcome["existing"] if not e["matches"]]
    for entry in mismatched:
        module.warn("%s: %s already has key %s upstream with value %s (wanted %s); left unchanged." % (
            path, symbol, entry["key"], entry["value"], entry["wanted"]))
    if outcome["added"]:
        result["msg"] = "added key(s) %s to %s in %s" % (", ".join(e["key"] for e in outcome["added"]), symbol, path)
    elif outcome["existing"]:
        result["msg"] = "key(s) %s already present in %s (upstream or earlier run); no change" % (
            ", ".join(e["key"] for e in outcome["existing"]), symbol)
    else:
        result["msg"] = "read %s in %s" % (symbol, path)
    if outcome["changed"] and module._diff:
        result["diff"] = {"before_header": path, "after_header": path,
                          "before": data.decode("utf-8"), "after": new.decode("utf-8")}
    result["restart_marked"] = False
    if outcome["changed"] and not module.check_mode:
        if params.get("restart_marker"):
            result["restart_marked"] = maybe_mark(module, params["restart_marker"], params.get("restart_source")
                                                  or "python_source_patch", params.get("restart_reason") or result["msg"])
        if params["backup"]:
            result["backup_file"] = module.backup_local(path)
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(new)
            module.atomic_move(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        data = read_file(path)  # report what is on disk now, re-parsed
    shown = read_entries(data, symbol, path)
    result["keys"] = [e["key"] for e in shown]
    result["literal_keys"] = _literal_keys(shown)
    return result
