# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read SGLang's command-line flag definitions from its source, without importing SGLang.

Importing `sglang.srt.server_args` pulls torch, transformers and CUDA libraries (seconds to minutes,
and impossible before SGLang is installed), so the definitions are read statically with `ast`:

* releases <= 0.5.13: every `parser.add_argument(...)` call in `sglang/srt/server_args.py`;
* releases >= 0.5.14: the annotated dataclass fields in `sglang/srt/arg_groups/fields/*.py`
  (`name: A[T, "help" | Arg(...)] = default`, CLI name `--name-with-dashes` unless `cli_name`,
  `aliases`, `no_cli`; bool -> store_true; Literal -> choices; see
  `sglang/srt/arg_groups/arg_utils.py: add_cli_args_from_dataclass`) plus the manual
  `parser.add_argument` calls left in `server_args.py` (parsers, deprecated flags).

`choices=` expressions are evaluated by a tiny evaluator that understands list/tuple/set literals,
`[*A, "x"]`, `A + B`, `list(X)`, `set(X)`, `X.keys()`, module constants, `from M import N`
(resolved to files in the same tree), class attributes holding dicts (`ReasoningParser.DetectorMap`)
and module functions whose `return` it can evaluate. What it cannot evaluate becomes "any value"
(never a false refusal). `check_argv()` then walks an argv like argparse does (no prefix matching:
SGLang's own parser allows abbreviations, but a rendered unit must spell flags in full).
"""

from __future__ import annotations

import ast
import difflib
import os
import re

__all__ = ["FlagDef", "FlagTable", "FlagSourceError", "load_flag_table", "read_version", "check_argv",
           "parse_argv", "version_tuple", "BUILTIN_ALIASES", "read_quantization_capabilities", "read_gdn_blackwell_backends"]

# Actions that take no value on the command line.
_NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version",
                     "DeprecatedStoreTrueAction", "DeprecatedStoreConstAction", "DeprecatedAction",
                     "BooleanOptionalAction"}
# Actions for which giving the flag twice is meaningful (argparse accumulates instead of overwriting).
_REPEATABLE_ACTIONS = {"append", "append_const", "extend", "count"}


class FlagSourceError(Exception):
    """The directory does not hold SGLang flag definitions this reader understands."""


class FlagDef:
    """One command-line option as SGLang's argparse parser would define it."""

    __slots__ = ("names", "dest", "takes_value", "nargs", "choices", "value_type", "deprecated", "repeatable",
                 "source", "successor")

    def __init__(self, names, dest, takes_value=True, nargs=None, choices=None, value_type=None,
                 deprecated=False, source="", repeatable=False, successor=None):
        self.names = tuple(names)
        self.dest = dest
        self.takes_value = takes_value
        self.nargs = nargs
        self.choices = list(choices) if choices is not None else None
        self.value_type = value_type
        self.deprecated = deprecated
        self.repeatable = repeatable
        self.source = source
        # A deprecated flag's replacement as its own release names it ("--flashinfer-allreduce-fusion-backend=auto"):
        # the action's new_flag= or the flag a deprecation note in the help text names; None when it names none.
        self.successor = successor

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return "FlagDef(%r, takes_value=%r, choices=%r)" % (self.names, self.takes_value, self.choices)


class FlagTable:
    """All flags of one SGLang tree, by option string."""

    def __init__(self, sglang_dir, layout, version=None):
        self.sglang_dir = sglang_dir
        self.layout = layout  # "server_args" (<= 0.5.13) or "arg_groups" (>= 0.5.14)
        self.version = version
        self.flags = {}  # option string -> FlagDef
        # Release facts beside the flags (None: not known): quantization method -> minimum compute
        # capability (major * 10 + minor) and the attention backends hybrid GDN models accept on Blackwell.
        self.quant_min_capability = None
        self.gdn_blackwell = None
        # Where the definitions came from: "tree" (an SGLang directory on the host) or "release table"
        # (plugins/module_utils/sglang_release_table.py, generated from PyPI releases).
        self.origin = "tree"

    def add(self, flag):
        for name in flag.names:
            self.flags.setdefault(name, flag)

    def get(self, option):
        return self.flags.get(option)

    def choices_of(self, option):
        flag = self.flags.get(option)
        return None if flag is None else flag.choices

    def suggest(self, option):
        return difflib.get_close_matches(option, list(self.flags), n=3, cutoff=0.75)

    def summary(self):
        return {"layout": self.layout, "version": self.version, "flag_count": len(set(map(id, self.flags.values())))}

    def definitions(self):
        """Every FlagDef once, in definition order."""
        seen, out = set(), []
        for flag in self.flags.values():
            if id(flag) not in seen:
                seen.add(id(flag))
                out.append(flag)
        return out

    def canonical(self, option):
        """The first option string of OPTION's definition (aliases collapse to one name), or None."""
        flag = self.flags.get(option)
        return None if flag is None else flag.names[0]


# ------------------------------------------------------------------------------------------------
# Version
# ------------------------------------------------------------------------------------------------
_VERSION_RE = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.M)


def read_version(sglang_dir):
    """Return the release string of the SGLang tree at SGLANG_DIR (the `sglang` package), or None.

    Looks at `sglang/_version.py` (written by setuptools-scm into wheels and sdists), then the
    installed `sglang-*.dist-info/METADATA` beside the package, then an sdist's `PKG-INFO`.
    """
    path = os.path.join(sglang_dir, "_version.py")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            match = _VERSION_RE.search(handle.read())
        if match:
            return match.group(1)
    parent = os.path.dirname(os.path.abspath(sglang_dir))
    candidates = []
    try:
        candidates = [os.path.join(parent, d, "METADATA") for d in sorted(os.listdir(parent))
                      if d.startswith("sglang-") and d.endswith(".dist-info")]
    except OSError:
        pass
    candidates += [os.path.join(parent, "PKG-INFO"), os.path.join(parent, "sglang.egg-info", "PKG-INFO")]
    for meta in candidates:
        if os.path.isfile(meta):
            with open(meta, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break
    return None


def version_tuple(version):
    """'0.5.10.post1' -> (0, 5, 10, 1); '0.5.23' -> (0, 5, 23, 0); None -> None. Good enough to compare
    SGLang releases (post releases sort after their base, dev/rc before)."""
    if not version:
        return None
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)(.*)$", version.strip().lstrip("v"))
    if not match:
        return None
    rest = match.group(4)
    post = re.search(r"post(\d+)", rest)
    pre = re.search(r"(rc|dev|a|b)(\d*)", rest)
    extra = int(post.group(1)) if post else (-1 if pre else 0)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3)), extra)


# ------------------------------------------------------------------------------------------------
# A tiny evaluator for `choices=` expressions
# ------------------------------------------------------------------------------------------------
class _Unknown(Exception):
    pass


class _Module:
    """A parsed source file: module-level assignments, imports, classes and functions."""

    def __init__(self, tree, path, loader):
        self.path = path
        self.loader = loader
        self.assign = {}
        self.imports = {}  # local name -> (module dotted path, name)
        self.classes = {}
        self.functions = {}
        for node in tree.body:
            self._index(node)

    def _index(self, node):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.assign[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            self.assign[node.target.id] = node.value
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                self.imports[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.ClassDef):
            self.classes[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions[node.name] = node
        elif isinstance(node, (ast.If, ast.Try)):
            for child in node.body:
                self._index(child)


class _Loader:
    """Parses files of one SGLang tree on demand (dotted module -> _Module)."""

    def __init__(self, sglang_dir):
        self.root = os.path.dirname(os.path.abspath(sglang_dir))
        self.cache = {}

    def module(self, dotted):
        if dotted in self.cache:
            return self.cache[dotted]
        base = os.path.join(self.root, *dotted.split("."))
        mod = None
        for path in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(path):
                mod = self.parse(path)
                break
        self.cache[dotted] = mod
        return mod

    def parse(self, path):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=path)
        return _Module(tree, path, self)


def _evaluate(node, mod, local=None, depth=0):
    """Evaluate NODE to a list of constants (choices) or a constant; raise _Unknown otherwise."""
    if depth > 12:
        raise _Unknown()
    local = local or {}

    def ev(sub):
        return _evaluate(sub, mod, local, depth + 1)

    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                out.extend(ev(elt.value))
            else:
                out.append(ev(elt))
        return out
    if isinstance(node, ast.Dict):
        return [ev(k) for k in node.keys if k is not None]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = ev(node.left), ev(node.right)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        raise _Unknown()
    if isinstance(node, ast.Name):
        if node.id in local:
            return _evaluate(local[node.id][0], local[node.id][1], {}, depth + 1)
        return _resolve_name(node.id, mod, depth)
    if isinstance(node, ast.Attribute):
        # Class.attr (dict/list class attribute) or X.keys handled by the Call branch.
        if isinstance(node.value, ast.Name):
            cls, cls_mod = _resolve_class(node.value.id, mod)
            if cls is not None:
                for stmt in cls.body:
                    targets = []
                    if isinstance(stmt, ast.Assign):
                        targets = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
                    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
                        targets = [stmt.target.id]
                    if node.attr in targets:
                        return _evaluate(stmt.value, cls_mod, {}, depth + 1)
        raise _Unknown()
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("list", "set", "sorted", "tuple") and len(node.args) == 1:
            value = ev(node.args[0])
            if isinstance(value, list):
                return list(value)
            raise _Unknown()
        if isinstance(func, ast.Attribute) and func.attr == "keys" and not node.args:
            value = ev(func.value)
            if isinstance(value, list):
                return value
            raise _Unknown()
        if isinstance(func, ast.Name) and func.id in mod.functions:
            return _evaluate_function(mod.functions[func.id], mod, depth)
        raise _Unknown()
    raise _Unknown()


def _resolve_name(name, mod, depth):
    if name in mod.assign:
        return _evaluate(mod.assign[name], mod, {}, depth + 1)
    if name in mod.imports:
        dotted, orig = mod.imports[name]
        other = mod.loader.module(dotted)
        if other is not None:
            return _resolve_name(orig, other, depth + 1)
    raise _Unknown()


def _resolve_class(name, mod):
    if name in mod.classes:
        return mod.classes[name], mod
    if name in mod.imports:
        dotted, orig = mod.imports[name]
        other = mod.loader.module(dotted)
        if other is not None:
            return _resolve_class(orig, other)
    return None, None


def _function_locals(func, mod):
    """Local assignments and imports of a function body, in order (later ones win)."""
    local = {}
    for stmt in ast.walk(func):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    local[target.id] = (stmt.value, mod)
        elif isinstance(stmt, ast.ImportFrom) and stmt.module:
            other = mod.loader.module(stmt.module)
            if other is None:
                continue
            for alias in stmt.names:
                if alias.name in other.assign:
                    local[alias.asname or alias.name] = (other.assign[alias.name], other)
    return local


def _evaluate_function(func, mod, depth):
    local = _function_locals(func, mod)
    for stmt in ast.walk(func):
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            try:
                return _evaluate(stmt.value, mod, local, depth + 1)
            except _Unknown:
                continue
    raise _Unknown()


# ------------------------------------------------------------------------------------------------
# add_argument calls (server_args.py, all releases)
# ------------------------------------------------------------------------------------------------
def _kw(call, name):
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def _action_name(node):
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _type_name(node):
    name = _action_name(node)
    return name if name in ("int", "float") else None


def _collect_add_argument(table, mod, relpath):
    for func in list(mod.functions.values()) + [f for c in mod.classes.values() for f in c.body
                                                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        local = _function_locals(func, mod)
        for call in ast.walk(func):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "add_argument"):
                continue
            names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            names = [n for n in names if n.startswith("-")]
            if not names:
                continue
            action = _action_name(_kw(call, "action"))
            nargs_node = _kw(call, "nargs")
            nargs = nargs_node.value if isinstance(nargs_node, ast.Constant) else None
            takes_value = action not in _NO_VALUE_ACTIONS
            if action in ("DeprecatedStoreConstAction",) and nargs_node is not None and nargs is None:
                takes_value = True  # nargs=None: the deprecated spelling takes the old value
            if nargs == 0:
                takes_value = False
            choices = None
            choices_node = _kw(call, "choices")
            if choices_node is not None:
                try:
                    value = _evaluate(choices_node, mod, local)
                    choices = [str(c) for c in value] if isinstance(value, list) else None
                except _Unknown:
                    choices = None
            help_node = _kw(call, "help")
            help_text = ""
            if isinstance(help_node, ast.Constant) and isinstance(help_node.value, str):
                help_text = help_node.value
            elif isinstance(help_node, ast.JoinedStr):
                help_text = "".join(v.value for v in help_node.values if isinstance(v, ast.Constant))
            dest_node = _kw(call, "dest")
            dest = dest_node.value if isinstance(dest_node, ast.Constant) else names[0].lstrip("-").replace("-", "_")
            deprecated = bool(action and action.startswith("Deprecated")) or "deprecated" in help_text.lower()[:40]
            new_flag = _kw(call, "new_flag")
            flag = FlagDef(names, dest, takes_value=takes_value, nargs=nargs, choices=choices,
                           value_type=_type_name(_kw(call, "type")), deprecated=deprecated,
                           source="%s:%d" % (relpath, call.lineno), repeatable=action in _REPEATABLE_ACTIONS,
                           successor=_successor_text(deprecated, new_flag, help_text))
            table.add(flag)
            if action == "BooleanOptionalAction":
                table.add(FlagDef(["--no-" + n[2:] for n in names if n.startswith("--")], dest, takes_value=False,
                                  source=flag.source))


# A flag as a deprecation note writes it: "--x-y", "--x-y=auto", "--x-{decode,prefill}=disabled".
_NOTE_FLAG_RE = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*(?:\{[A-Za-z0-9_,-]+\}[A-Za-z0-9_-]*)?(?:=[A-Za-z0-9_.-]+)?")


def _successor_text(deprecated, new_flag, help_text):
    """What a deprecated definition says replaces it (resolve_successor() keeps only a flag of the same tree)."""
    if not deprecated:
        return None
    if isinstance(new_flag, ast.Constant) and isinstance(new_flag.value, str):
        return new_flag.value
    return help_text if "deprecat" in help_text.lower() else None


def resolve_successor(flag, table):
    """The first flag named in FLAG's successor text that TABLE defines and FLAG is not ('--x' or '--x=value')."""
    for word in _NOTE_FLAG_RE.findall(flag.successor or ""):
        name, _sep, value = word.partition("=")
        value = value.rstrip(".-")
        braces = re.match(r"^(.*)\{([^}]*)\}(.*)$", name)
        for candidate in ([braces.group(1) + alt + braces.group(3) for alt in braces.group(2).split(",")]
                          if braces else [name]):
            if candidate not in flag.names and table.get(candidate) is not None:
                return candidate + ("=" + value if value else "")
    return None


# ------------------------------------------------------------------------------------------------
# Annotated dataclass fields (arg_groups, >= 0.5.14)
# ------------------------------------------------------------------------------------------------
def _subscript_parts(node):
    """A[T, meta, ...] -> (name 'A', [T, meta, ...])."""
    if not isinstance(node, ast.Subscript):
        return None, []
    base = _action_name(node.value)
    inner = node.slice
    parts = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
    return base, parts


def _unwrap_type(node, mod):
    """Return (kind, literal_values): kind in bool/int/float/str/list/other."""
    base, parts = _subscript_parts(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        for side in (node.left, node.right):
            if not (isinstance(side, ast.Constant) and side.value is None):
                return _unwrap_type(side, mod)
    if base == "Optional" and parts:
        return _unwrap_type(parts[0], mod)
    if base == "Union" and parts:
        real = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
        if len(real) == 1:
            return _unwrap_type(real[0], mod)
        return "other", None
    if base == "Literal":
        try:
            return "literal", [_evaluate(p, mod) for p in parts]
        except _Unknown:
            return "other", None
    if base in ("List", "list"):
        return "list", None
    name = _action_name(node)
    if name in ("bool", "int", "float", "str"):
        return name, None
    return "other", None


def _collect_fields(table, mod, relpath):
    for cls in mod.classes.values():
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            base, parts = _subscript_parts(stmt.annotation)
            if base not in ("A", "Annotated") or len(parts) < 2:
                continue
            field = stmt.target.id
            meta = parts[1]
            kwargs = {}
            if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
                pass
            elif isinstance(meta, ast.Call) and _action_name(meta.func) == "Arg":
                kwargs = {k.arg: k.value for k in meta.keywords if k.arg}
            else:
                continue  # not an Arg annotation: registered manually (or not at all)
            if isinstance(kwargs.get("no_cli"), ast.Constant) and kwargs["no_cli"].value is True:
                continue
            cli_name = "--" + field.replace("_", "-")
            if isinstance(kwargs.get("cli_name"), ast.Constant):
                cli_name = kwargs["cli_name"].value
            names = [cli_name]
            if "aliases" in kwargs:
                try:
                    names += [str(a) for a in _evaluate(kwargs["aliases"], mod)]
                except _Unknown:
                    pass
            kind, literal = _unwrap_type(stmt.annotation.slice.elts[0], mod)
            action = _action_name(kwargs.get("action"))
            choices = None
            if "choices" in kwargs:
                try:
                    value = _evaluate(kwargs["choices"], mod)
                    choices = [str(c) for c in value] if isinstance(value, list) else None
                except _Unknown:
                    choices = None
            elif literal is not None:
                choices = [str(c) for c in literal]
            nargs = kwargs["nargs"].value if isinstance(kwargs.get("nargs"), ast.Constant) else None
            takes_value = True
            if action is not None:
                takes_value = action not in _NO_VALUE_ACTIONS
            elif kind == "bool":
                takes_value = False
            if nargs == 0:
                takes_value = False
            help_node = kwargs.get("help", meta if isinstance(meta, ast.Constant) else None)
            help_text = help_node.value if isinstance(help_node, ast.Constant) and isinstance(help_node.value, str) else ""
            deprecated = "deprecated" in help_text.lower()[:40] or bool(action and action.startswith("Deprecated"))
            new_flag = None
            if isinstance(kwargs.get("action_kwargs"), ast.Dict):
                for key, value in zip(kwargs["action_kwargs"].keys, kwargs["action_kwargs"].values):
                    if isinstance(key, ast.Constant) and key.value == "new_flag":
                        new_flag = value
            flag = FlagDef(names, field, takes_value=takes_value, nargs=nargs, choices=choices,
                           value_type=kind if kind in ("int", "float") else None, deprecated=deprecated,
                           source="%s:%d" % (relpath, stmt.lineno), repeatable=action in _REPEATABLE_ACTIONS,
                           successor=_successor_text(deprecated, new_flag, help_text))
            table.add(flag)
            if action == "BooleanOptionalAction":
                table.add(FlagDef(["--no-" + n[2:] for n in names if n.startswith("--")], field,
                                  takes_value=False, source=flag.source))


def load_flag_table(sglang_dir):
    """Read every launch_server flag of the SGLang tree at SGLANG_DIR (the `sglang` package directory)."""
    server_args = os.path.join(sglang_dir, "srt", "server_args.py")
    if not os.path.isfile(server_args):
        raise FlagSourceError(
            "%s has no srt/server_args.py: not an SGLang package directory (expected the `sglang` folder of a "
            "wheel install, e.g. <venv>/lib/python3.X/site-packages/sglang, or python/sglang in a checkout)"
            % sglang_dir)
    loader = _Loader(sglang_dir)
    fields_dir = os.path.join(sglang_dir, "srt", "arg_groups", "fields")
    arg_groups = os.path.isdir(os.path.join(sglang_dir, "srt", "arg_groups"))
    layout = "arg_groups" if arg_groups else "server_args"
    table = FlagTable(sglang_dir, layout, read_version(sglang_dir))
    try:
        if os.path.isdir(fields_dir):  # 0.5.15+: fields split by namespace
            for name in sorted(os.listdir(fields_dir)):
                if name.endswith(".py"):
                    path = os.path.join(fields_dir, name)
                    _collect_fields(table, loader.module("sglang.srt.arg_groups.fields." + name[:-3]),
                                    os.path.relpath(path, os.path.dirname(sglang_dir)))
        mod = loader.module("sglang.srt.server_args")
        _collect_fields(table, mod, "sglang/srt/server_args.py")  # 0.5.14: fields on ServerArgs itself
        _collect_add_argument(table, mod, "sglang/srt/server_args.py")
    except SyntaxError as exc:
        raise FlagSourceError("cannot parse %s: %s" % (exc.filename, exc))
    if "--model-path" not in table.flags:
        raise FlagSourceError("no --model-path definition found under %s: unknown SGLang source layout" % sglang_dir)
    for flag in table.definitions():
        flag.successor = resolve_successor(flag, table)
    try:
        table.quant_min_capability = read_quantization_capabilities(sglang_dir)
        table.gdn_blackwell = read_gdn_blackwell_backends(sglang_dir)
    except (SyntaxError, OSError, RecursionError):
        pass  # facts beside the flags are optional: the rules that need them fall back to conservative sets
    return table


# ------------------------------------------------------------------------------------------------
# Release facts beside the flags: quantization vs compute capability, hybrid GDN backends on Blackwell
# ------------------------------------------------------------------------------------------------
# Deployments are CUDA: SGLang's platform switches are read as such (is_cuda() true; NPU, ROCm/HIP,
# MUSA, XPU, MPS, HPU and CPU branches false). Anything else is "unknown" and both branches count.
_PLATFORM_FALSE = ("npu", "hip", "musa", "xpu", "mps", "hpu", "cpu", "gfx", "rocm")


def _platform_truth(node):
    """True / False / None (unknown) for an `if` test, assuming an NVIDIA CUDA host."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _platform_truth(node.operand)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        parts = [_platform_truth(v) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in parts else (True if all(p is True for p in parts) else None)
        return True if True in parts else (False if all(p is False for p in parts) else None)
    if isinstance(node, ast.Call) and not node.args:
        node = node.func
    name = _action_name(node)
    if not isinstance(name, str):
        return None
    word = name.lstrip("_").lower()
    if not word.startswith("is_"):
        return None
    if word in ("is_cuda", "is_cuda_alike"):
        return True
    if any(part in word for part in _PLATFORM_FALSE):
        return False
    return None


def _platform_branches(node):
    truth = _platform_truth(node.test)
    if truth is True:
        return [node.body]
    if truth is False:
        return [node.orelse]
    return [node.body, node.orelse]


def _dict_items(node, known, mod):
    """{key: value node} of a dict literal (with **NAME merges of dicts in KNOWN); None when not a literal."""
    if isinstance(node, ast.Name) and node.id in known:
        return dict(known[node.id])
    if not isinstance(node, ast.Dict):
        return None
    out = {}
    for key, value in zip(node.keys, node.values):
        if key is None:
            merged = _dict_items(value, known, mod)
            if merged is not None:
                out.update(merged)
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            out[key.value] = value
    return out


def _module_dicts(statements, mod, known):
    """Module-level dict assignments and NAME.update({...}) calls, following platform `if`s."""
    for stmt in statements:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            items = _dict_items(stmt.value, known, mod) if stmt.value is not None else None
            for target in targets:
                if isinstance(target, ast.Name) and items is not None:
                    known[target.id] = items
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if isinstance(call.func, ast.Attribute) and call.func.attr == "update" \
                    and isinstance(call.func.value, ast.Name) and call.func.value.id in known and call.args:
                items = _dict_items(call.args[0], known, mod)
                if items is not None:
                    known[call.func.value.id].update(items)
        elif isinstance(stmt, ast.If):
            for branch in _platform_branches(stmt):
                _module_dicts(branch, mod, known)
        elif isinstance(stmt, ast.Try):
            _module_dicts(stmt.body, mod, known)
    return known


def _class_method(cls, cls_mod, name, depth=0):
    """(FunctionDef, module, class) of NAME on CLS or its bases within the tree, or (None, None, None)."""
    if depth > 8 or cls is None:
        return None, None, None
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            return stmt, cls_mod, cls
    for base in cls.bases:
        base_name = _action_name(base)
        if isinstance(base_name, str):
            base_cls, base_mod = _resolve_class(base_name, cls_mod)
            found = _class_method(base_cls, base_mod, name, depth + 1)
            if found[0] is not None:
                return found
    return None, None, None


def _capability_values(node, cls, mod, depth):
    """Possible integer results of a get_min_capability() return expression."""
    if depth > 10:
        raise _Unknown()
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return {node.value}
    if isinstance(node, ast.IfExp):
        truth = _platform_truth(node.test)
        values = set()
        if truth in (True, None):
            values |= _capability_values(node.body, cls, mod, depth + 1)
        if truth in (False, None):
            values |= _capability_values(node.orelse, cls, mod, depth + 1)
        return values
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get_min_capability":
        owner = node.func.value
        if isinstance(owner, ast.Call) and _action_name(owner.func) == "super":
            for base in cls.bases:
                base_cls, base_mod = _resolve_class(_action_name(base) or "", mod)
                if base_cls is not None:
                    return _min_capability_values(base_cls, base_mod, depth + 1)
            raise _Unknown()
        owner_name = _action_name(owner)
        if isinstance(owner_name, str):
            other, other_mod = _resolve_class(owner_name, mod)
            if other is not None:
                return _min_capability_values(other, other_mod, depth + 1)
    raise _Unknown()


def _returns_of(statements, cls, mod, depth):
    """(values, terminated): what a function body can return, following platform `if`s."""
    values = set()
    for stmt in statements:
        if isinstance(stmt, ast.Return):
            if stmt.value is None:
                raise _Unknown()
            return values | _capability_values(stmt.value, cls, mod, depth), True
        if isinstance(stmt, ast.Raise):
            return values, True
        if isinstance(stmt, ast.If):
            branches = _platform_branches(stmt)
            ends = []
            for branch in branches:
                found, ended = _returns_of(branch, cls, mod, depth)
                values |= found
                ends.append(ended and bool(branch))
            if all(ends):
                return values, True
    return values, False


def _min_capability_values(cls, mod, depth=0):
    func, func_mod, owner = _class_method(cls, mod, "get_min_capability")
    if func is None:
        raise _Unknown()
    values, _ended = _returns_of(func.body, owner, func_mod, depth)
    if not values:
        raise _Unknown()  # e.g. the base class: raise NotImplementedError
    return values


def read_quantization_capabilities(sglang_dir):
    """{method: minimum compute capability (major * 10 + minor)} for the --quantization methods of the tree.

    SGLang's model loader refuses a GPU whose capability is below `quant_config.get_min_capability()`
    ("The quantization method X is not supported for the current GPU. Minimum capability: ...";
    sglang/srt/model_loader/loader.py). Methods are read from QUANTIZATION_METHODS in
    sglang/srt/layers/quantization/__init__.py; where a method's minimum depends on runtime state
    (`100 if self.use_mxfp8 else 80`) the lowest value is kept, and a method whose minimum cannot be read
    (a vLLM class outside the tree) is left out: never a false refusal.
    """
    loader = _Loader(sglang_dir)
    dotted = "sglang.srt.layers.quantization"
    path = os.path.join(loader.root, *dotted.split(".")) + os.sep + "__init__.py"
    if not os.path.isfile(path):
        return None
    mod = loader.module(dotted)
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    known = _module_dicts(tree.body, mod, {})
    methods = known.get("QUANTIZATION_METHODS") or known.get("BASE_QUANTIZATION_METHODS")
    if not methods:
        return None
    out = {}
    for method, value in methods.items():
        name = _action_name(value)
        cls, cls_mod = _resolve_class(name, mod) if isinstance(name, str) else (None, None)
        if cls is None:
            continue
        try:
            out[method] = min(_min_capability_values(cls, cls_mod))
        except (_Unknown, RecursionError):
            continue
    return out


def _string_set(node, mod):
    try:
        value = _evaluate(node, mod)
    except _Unknown:
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return sorted(set(value))
    return None


def _gdn_sets(statements, mod, sm120, found):
    """Collect allowed-backend sets under `if is_blackwell():` (FOUND: {'sm100': set, 'sm120': set, 'checks': set})."""
    for stmt in statements:
        for node in ast.walk(stmt) if not isinstance(stmt, ast.If) else [stmt.test]:
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
                left, right = node.left, node.comparators[0]
                if isinstance(right, ast.Constant) and isinstance(right.value, str):
                    attr = _action_name(left) or ""
                    if attr.endswith("backend"):
                        for key in (("sm120",) if sm120 else ("sm100", "sm120")):
                            found[key].add(right.value)
                        found["checks"].add(attr)
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
                attr = _action_name(node.left) or ""
                if attr.endswith(("backend", "_be", "backend_str")):
                    found["checks"].add(attr)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                values = _string_set(node.value, mod)
                if values:
                    for key in (("sm120",) if sm120 else ("sm100",) if found["split"] else ("sm100", "sm120")):
                        found[key].update(values)
        if isinstance(stmt, ast.If):
            mentions_sm120 = "sm120" in ast.dump(stmt.test).lower() or "sm12" in ast.dump(stmt.test).lower()
            if mentions_sm120:
                found["split"] = True
                _gdn_sets(stmt.body, mod, True, found)
                _gdn_sets(stmt.orelse, mod, False, found)
            else:
                _gdn_sets(stmt.body, mod, sm120, found)
                _gdn_sets(stmt.orelse, mod, sm120, found)


def read_gdn_blackwell_backends(sglang_dir):
    """The attention backends SGLang accepts for hybrid GDN models on Blackwell, read from the assert in
    sglang/srt/layers/attention/attention_registry.py: {'sm100': [...], 'sm120': [...], 'checks': [...]}
    ('checks': the backend settings the assert looks at: attention_backend alone in older releases,
    the prefill and decode backends in newer ones). None when the release has no such check."""
    loader = _Loader(sglang_dir)
    dotted = "sglang.srt.layers.attention.attention_registry"
    mod = loader.module(dotted)
    if mod is None:
        return None
    with open(mod.path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=mod.path)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.If) and "hybrid_gdn_config" in ast.dump(node.test)):
            continue
        for inner in node.body:
            if isinstance(inner, ast.If) and _action_name(getattr(inner.test, "func", inner.test)) == "is_blackwell":
                found = {"sm100": set(), "sm120": set(), "checks": set(), "split": False}
                _gdn_sets(inner.body, mod, False, found)
                if found["sm100"] or found["sm120"]:
                    checks = sorted({"prefill_attention_backend" if "prefill" in c else
                                     "decode_attention_backend" if "decode" in c else
                                     "attention_backend" for c in found["checks"]})
                    return {"sm100": sorted(found["sm100"]), "sm120": sorted(found["sm120"] or found["sm100"]),
                            "checks": checks}
    return None


# ------------------------------------------------------------------------------------------------
# argv check
# ------------------------------------------------------------------------------------------------
def _type_ok(value, value_type):
    try:
        if value_type == "int":
            int(value)
        elif value_type == "float":
            float(value)
    except ValueError:
        return False
    return True


# Spellings that mean the same option when no flag table is at hand (SGLang's own aliases).
BUILTIN_ALIASES = {"--tensor-parallel-size": "--tp-size", "--enable-hicache": "--enable-hierarchical-cache",
                   "--model": "--model-path"}


def _is_option(word):
    return str(word).startswith("--")


def parse_argv(table, argv):
    """Walk ARGV like argparse does (no prefix matching) and return (occurrences, problems).

    occurrences: one dict per option given: option (as written), key (the destination argparse stores it
    in: FlagDef.dest with a TABLE, else the option with SGLang's aliases folded), values (list of str;
    [] for a switch), index (position of the option word in ARGV), flag (FlagDef or None).
    problems: dicts with flag, value, reason, suggestions, index: unknown flags (with close matches),
    missing values, values given to switches, stray words, bad choices, non-numeric values for int/float
    flags. Without a TABLE (None) only the shape is known: an option takes the words up to the next
    option, and nothing is refused.
    """
    occurrences, problems = [], []
    i = 0
    previous_switch = None
    while i < len(argv):
        index = i
        token = str(argv[i])
        i += 1
        if not _is_option(token):
            reason = "stray word: it follows the switch %s, which takes no value" % previous_switch \
                if previous_switch else "stray positional argument"
            problems.append({"flag": token, "value": None, "reason": reason, "suggestions": [], "index": index,
                             "after_switch": previous_switch})
            continue
        previous_switch = None
        option, has_eq, inline = token.partition("=")
        if table is None:
            values = [inline] if has_eq else []
            while not has_eq and i < len(argv) and not _is_option(argv[i]):
                values.append(str(argv[i]))
                i += 1
            occurrences.append({"option": option, "key": BUILTIN_ALIASES.get(option, option), "values": values,
                                "index": index, "flag": None, "value_index": index if has_eq else index + 1})
            continue
        flag = table.get(option)
        if flag is None:
            problems.append({"flag": option, "value": inline if has_eq else None, "index": index,
                             "reason": "not defined by this SGLang release", "suggestions": table.suggest(option)})
            while i < len(argv) and not _is_option(argv[i]):  # the value words of the unknown flag
                i += 1
            continue
        occurrence = {"option": option, "key": flag.dest, "values": [], "index": index, "flag": flag,
                      "value_index": index if has_eq else index + 1}
        occurrences.append(occurrence)
        if not flag.takes_value:
            if has_eq:
                problems.append({"flag": option, "value": inline, "reason": "is a switch and takes no value",
                                 "suggestions": [], "index": index})
            previous_switch = option
            continue
        values = []
        if has_eq:
            values = [inline]
        elif flag.nargs in ("+", "*"):
            while i < len(argv) and not _is_option(argv[i]):
                values.append(str(argv[i]))
                i += 1
        elif flag.nargs == "?":
            if i < len(argv) and not _is_option(argv[i]):
                values = [str(argv[i])]
                i += 1
        elif i < len(argv):
            values = [str(argv[i])]
            i += 1
        occurrence["values"] = values
        if not values and flag.nargs not in ("*", "?"):
            problems.append({"flag": option, "value": None, "reason": "expects a value", "suggestions": [],
                             "index": index})
            continue
        for value in values:
            if flag.choices is not None and value not in flag.choices:
                problems.append({"flag": option, "value": value, "reason": "invalid choice",
                                 "suggestions": sorted(flag.choices), "index": index})
            elif not _type_ok(value, flag.value_type):
                problems.append({"flag": option, "value": value, "reason": "expects %s" % _type_words(flag.value_type),
                                 "suggestions": [], "index": index})
    return occurrences, problems


def _type_words(value_type):
    return {"int": "an integer", "float": "a number"}.get(value_type, value_type)


def check_argv(table, argv):
    """Return the problems (dicts: flag, value, reason, suggestions, index) of ARGV against TABLE (see parse_argv)."""
    return parse_argv(table, argv)[1]
