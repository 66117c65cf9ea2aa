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
import os


__all__ = [
    "PatchError",
    "SymbolNotFound",
    "ensure_entries",
    "find_dict",
    "listed_keys",
    "read_entries",
    "resolve_read_target",
    "resolve_target",
    "run_patch",
    "stale_copies",
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
                             " | ".join(note.rstrip(".") for note in notes)))


# Statements whose bodies run in the module's own namespace (so a name bound there is a module
# global), but only under a condition: a binding inside one cannot be resolved statically.
_CONDITIONAL = tuple(getattr(ast, n) for n in ("If", "Try", "TryStar", "With", "AsyncWith", "For", "AsyncFor",
                                               "While", "Match") if hasattr(ast, n))
_MAX_HOPS = 8


def _bound_names(target):
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _bound_names(elt)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def _statement_bindings(stmt, name):
    """How STMT binds NAME at its own level: a list of (kind, detail); kinds: dict, value, unpack,
    import_from, import, class, function, augmented, star."""
    found = []
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            if isinstance(target, ast.Name) and target.id == name:
                found.append(("dict" if isinstance(stmt.value, ast.Dict) else "value", type(stmt.value).__name__))
            elif name in _bound_names(target):
                found.append(("unpack", None))
    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
        if stmt.value is not None:
            found.append(("dict" if isinstance(stmt.value, ast.Dict) else "value", type(stmt.value).__name__))
    elif isinstance(stmt, ast.AugAssign) and name in _bound_names(stmt.target):
        found.append(("augmented", None))
    elif isinstance(stmt, ast.ImportFrom):
        for alias in stmt.names:
            if alias.name == "*":
                found.append(("star", stmt.module))
            elif (alias.asname or alias.name) == name:
                found.append(("import_from", (stmt.module, stmt.level, alias.name)))
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if (alias.asname or alias.name.split(".")[0]) == name:
                found.append(("import", alias.name))
    elif isinstance(stmt, ast.ClassDef) and stmt.name == name:
        found.append(("class", None))
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
        found.append(("function", None))
    elif isinstance(stmt, (ast.For, ast.AsyncFor)) and name in _bound_names(stmt.target):
        found.append(("value", "loop variable"))
    return found


def module_bindings(tree, name):
    """Every statement that binds NAME in the module namespace: (lineno, kind, detail, conditional).

    Star imports are listed too (kind ``star``), whatever name they might bind. Function and class
    bodies are other namespaces and are not searched; if/try/with/for/while/match bodies are, and
    their bindings are marked conditional.
    """
    out = []

    def walk(body, conditional):
        for stmt in body:
            for kind, detail in _statement_bindings(stmt, name):
                out.append((stmt.lineno, kind, detail, conditional))
            if isinstance(stmt, _CONDITIONAL):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(stmt, field, None) or [], True)
                for handler in getattr(stmt, "handlers", None) or []:
                    walk(handler.body, True)
                for case in getattr(stmt, "cases", None) or []:
                    walk(case.body, True)

    walk(tree.body, False)
    return out


def _module_file(importer, module, level, exists):
    """The file of MODULE as imported from the file IMPORTER (absolute or LEVEL-relative import).

    An absolute name is looked up under the nearest parent directory of IMPORTER named after its
    first component (``sglang.srt.x`` -> ``.../sglang/srt/x.py``): no sys.path, no import.
    """
    if level:
        base = os.path.dirname(importer)
        for _level in range(level - 1):
            base = os.path.dirname(base)
        parts = module.split(".") if module else []
    else:
        parts = module.split(".")
        base = os.path.dirname(importer)
        while os.path.basename(base) != parts[0]:
            parent = os.path.dirname(base)
            if parent == base:
                raise PatchError("%s imports from %s, which is not part of the package tree the file is in "
                                 "(no parent directory named %s): a dict defined there cannot be patched "
                                 "here." % (importer, module, parts[0]))
            base = parent
        parts = parts[1:]
    target = os.path.join(base, *parts) if parts else base
    for candidate in (target + ".py", os.path.join(target, "__init__.py")):
        if exists(candidate):
            return candidate
    raise PatchError("%s imports from %s, but neither %s.py nor %s/__init__.py exists: the module moved; "
                     "update the patch data." % (importer, "." * (level or 0) + (module or ""), target, target))


def _describe_binding(path, line, kind, detail):
    if kind == "value":
        what = "assigned a %s, not a dict literal" % detail
    elif kind == "import":
        what = "bound to the module %s" % detail
    elif kind == "star":
        what = "possibly bound by `from %s import *`" % detail
    elif kind == "import_from":
        what = "imported from %s%s" % ("." * detail[1], detail[0] or "")
    else:
        what = {"unpack": "assigned by unpacking", "augmented": "changed by an augmented assignment",
                "class": "a class", "function": "a function", "dict": "a dict literal"}[kind]
    return "%s line %d: %s" % (path, line, what)


def _follow(path, symbol, read_file, exists, first):
    """Follow SYMBOL as the module PATH sees it to the dict literal it names.

    Returns (path, symbol, chain) of the defining file; chain lists each import hop. FIRST: when
    the name is not bound in PATH at all, raise SymbolNotFound (the caller may try another
    candidate); on later hops that is a PatchError naming both files.
    """
    head, dot, attr = symbol.partition(".")
    reader = path
    chain = []
    seen = set()
    importer = None
    for _hop in range(_MAX_HOPS):
        if (path, head) in seen:
            raise PatchError("import cycle while following %s: %s" % (symbol, " -> ".join(chain)))
        seen.add((path, head))
        data = read_file(path)
        tree = _parse_module(data, path)
        bindings = [b for b in module_bindings(tree, head) if b[1] != "star"]
        stars = [b for b in module_bindings(tree, head) if b[1] == "star"]
        if not bindings:
            note = ""
            if stars:
                note = " (%s: a star import may bind it; cannot follow statically)" % _describe_binding(path, *stars[0][:3])
            if first and importer is None:
                raise SymbolNotFound("%s: %s is not bound at module level%s; found instead %s." % (
                    path, head, note, _describe_found(tree, symbol)))
            raise PatchError("%s imports %s from %s, but %s does not bind it at module level%s; found instead "
                             "%s. The table was renamed or moved upstream: update the patch data." % (
                                 importer, head, path, path, note, _describe_found(tree, head)))
        if len(bindings) > 1:
            described = []
            for b_line, b_kind, b_detail, _b_conditional in bindings:
                text = _describe_binding(path, b_line, b_kind, b_detail)
                if b_kind == "import_from":
                    try:
                        text += " (%s)" % _module_file(path, b_detail[0], b_detail[1], exists)
                    except PatchError:
                        pass
                described.append(text)
            raise PatchError("%s binds %s %d times (%s): which table is read at run time depends on the order "
                             "of execution; refusing to patch one of them." % (
                                 path, head, len(bindings), "; ".join(described)))
        line, kind, detail, conditional = bindings[0]
        if conditional:
            raise PatchError("%s binds %s only conditionally (%s, inside an if/try/with/loop block): the table "
                             "read at run time cannot be told statically; refusing to patch." % (
                                 path, head, _describe_binding(path, line, kind, detail)))
        if kind == "import_from":
            module, level, original = detail
            target = _module_file(path, module, level, exists)
            chain.append("%s line %d imports %s from %s" % (path, line, original, target))
            importer, path, head = path, target, original
            continue
        if kind not in ("dict", "class") or (kind == "class") != bool(dot):
            where = ("%s reads %s from %s: " % (reader, symbol, path)) if chain else ""
            raise PatchError("%s%s is %s, not the dict literal the patch expects." % (
                where, _describe_binding(path, line, kind, detail), head))
        resolved = head + dot + attr
        find_dict(tree, resolved, path)  # a class without the attribute, or not a dict: a clear error
        return path, resolved, chain
    raise PatchError("more than %d imports while following %s from %s: %s" % (
        _MAX_HOPS, symbol, path, " -> ".join(chain)))


def resolve_read_target(candidates, read_file, exists):
    """Pick the first candidate (reader path, symbol) whose file exists and binds the symbol, and
    follow the symbol through its imports to the dict literal that reader uses at run time.

    Returns (index, reader path, reader symbol, defining path, defining symbol, chain, data of the
    defining file). Raises SymbolNotFound when no candidate binds the symbol, PatchError when a
    candidate binds it in a way that cannot be followed (conditional, twice, not a dict literal,
    imported from a module that does not define it).
    """
    notes = []
    for index, (path, symbol) in enumerate(candidates):
        if not exists(path):
            notes.append("%s: file does not exist (looked for %s)" % (path, symbol))
            continue
        try:
            target, resolved, chain = _follow(path, symbol, read_file, exists, first=True)
        except SymbolNotFound as exc:
            notes.append(str(exc))
            continue
        return index, path, symbol, target, resolved, chain, read_file(target)
    raise SymbolNotFound("No candidate dict found, nothing was changed. Tried: %s. The dict was renamed or "
                         "moved upstream: update the patch data (symbol/path/alternatives) to the new name." % (
                             " | ".join(note.rstrip(".") for note in notes)))


def stale_copies(copies, target, symbol, read_file, exists):
    """Other files of COPIES [(path, symbol or None)] that bind the same dict literal at module level,
    although the reader uses TARGET's: [{path, symbol, line, keys}]."""
    found = []
    for path, copy_symbol in copies:
        copy_symbol = copy_symbol or symbol
        if path == target or not exists(path):
            continue
        data = read_file(path)
        try:
            tree = _parse_module(data, path)
            node = find_dict(tree, copy_symbol, path)
        except PatchError:
            continue
        entries = read_entries(data, copy_symbol, path)
        found.append({"path": path, "symbol": copy_symbol, "line": node.lineno,
                      "keys": _literal_keys(entries)})
    return found


def _read_file(path):
    with open(path, "rb") as handle:
        return handle.read()


def listed_keys(data, symbol, path):
    """The dict's keys in DATA as the module reports them: source text and literal values."""
    shown = read_entries(data, symbol, path)
    return {"keys": [e["key"] for e in shown], "literal_keys": _literal_keys(shown)}


def _patch_warnings(path, symbol, outcome, read_by, copies):
    warnings = []
    for entry in outcome["existing"]:
        if not entry["matches"]:
            warnings.append("%s: %s already has key %s upstream with value %s (wanted %s); left unchanged." % (
                path, symbol, entry["key"], entry["value"], entry["wanted"]))
    for copy in copies:
        warnings.append("%s line %d also defines %s (keys %s), but %s reads the one in %s: that one is patched; the "
                        "copy is not what %s uses and was left unchanged (remove it upstream or in your fork)." % (
                            copy["path"], copy["line"], copy["symbol"], ", ".join(str(k) for k in copy["keys"]),
                            read_by["path"], path, read_by["path"]))
    return warnings


def _patch_message(path, symbol, outcome, read_by):
    if outcome["added"]:
        msg = "added key(s) %s to %s in %s" % (", ".join(e["key"] for e in outcome["added"]), symbol, path)
    elif outcome["existing"]:
        msg = "key(s) %s already present in %s (upstream or earlier run); no change" % (
            ", ".join(e["key"] for e in outcome["existing"]), symbol)
    else:
        msg = "read %s in %s" % (symbol, path)
    if read_by and read_by["path"] != path:
        msg += " (the table %s reads as %s)" % (read_by["path"], read_by["symbol"])
    return msg


def run_patch(params, read_file=_read_file, exists=os.path.isfile):
    """The python_source_patch module's work, without side effects.

    Returns a dict: ``result`` (the module's result but for ``keys``/``literal_keys``, ``restart_marked``
    and ``backup_file``, which depend on the write), ``warnings``, ``before`` and ``after`` (the file's
    bytes now and once patched) and ``diff`` (None when nothing changes). The caller warns, backs up and
    writes ``after`` when ``result["changed"]``.
    """
    entries = validate_entries([{k: v for k, v in e.items() if v is not None} for e in params["entries"]])
    candidates = [(params["path"], params["symbol"])]
    for alt in params["alternatives"]:
        candidates.append((alt.get("path") or params["path"], alt["symbol"]))

    follow = params.get("follow_imports")
    read_by, chain, copies = None, [], []
    if follow:
        index, reader, reader_symbol, path, symbol, chain, data = resolve_read_target(
            candidates, read_file, exists)
        read_by = {"path": reader, "symbol": reader_symbol}
        copies = stale_copies([(c["path"], c.get("symbol")) for c in params.get("copies") or []],
                              path, symbol, read_file, exists)
    else:
        index, path, symbol, data = resolve_target(candidates, read_file, exists)
    outcome = ensure_entries(data, symbol, entries, path)
    new = outcome["source"]
    if follow:
        # The table the reader uses at run time, followed again over the edited text: it must be
        # the one just patched and hold every added key, or nothing is written.
        def read_edited(name):
            return new if name == path else read_file(name)

        again_path, again_symbol, _chain = _follow(read_by["path"], read_by["symbol"], read_edited,
                                                   exists, first=True)
        again = find_dict(_parse_module(read_edited(again_path), again_path), again_symbol, again_path)
        missing = [e["key"] for e in entries if _find_key(again, _parse_expr(e["key"], "key")) is None]
        if (again_path, again_symbol) != (path, symbol) or missing:
            raise PatchError("%s reads %s from %s at run time, but the patch was computed for %s in %s%s; "
                             "nothing was changed." % (
                                 read_by["path"], read_by["symbol"], again_path, symbol, path,
                                 (" (keys %s missing there)" % ", ".join(missing)) if missing else ""))
    result = {
        "changed": outcome["changed"],
        "path": path,
        "symbol": symbol,
        "alternative": index - 1 if index else None,
        "added": outcome["added"],
        "existing": outcome["existing"],
        "read_by": read_by,
        "chain": chain,
        "stale_copies": copies,
        "msg": _patch_message(path, symbol, outcome, read_by),
    }
    diff = None
    if outcome["changed"]:
        diff = {"before_header": path, "after_header": path,
                "before": data.decode("utf-8"), "after": new.decode("utf-8")}
    return {"result": result, "warnings": _patch_warnings(path, symbol, outcome, read_by, copies),
            "before": data, "after": new, "diff": diff}
