# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render a model profile (llm_server_models entry) into SGLang's argv and environment.

One function, `render()`, used by the preflight module (to check the argv against the installed
release's real flag definitions) and by the sglang_service role (which writes exactly this argv into
the unit): what is checked is what runs. Release-dependent spellings are chosen here, from the flag
table when the release is known (docs/model-profiles.md, "Release-dependent rendering"). Control
characters are refused here too (`control_characters()` is the one definition the preflight rule uses).
"""

from __future__ import annotations

import unicodedata

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_flags import version_tuple

API_KEY_ENV = "GPUFLEET_SGLANG_API_KEY"
API_KEY_PLACEHOLDER = "${%s}" % API_KEY_ENV

# profile key -> SGLang flag, for plain "--flag value" settings (order = order in the argv).
VALUE_FLAGS = (
    ("model_path", "--model-path"),
    ("served_model_name", "--served-model-name"),
    ("tp_size", "--tp-size"),
    ("quantization", "--quantization"),
    ("attention_backend", "--attention-backend"),
    ("moe_runner_backend", "--moe-runner-backend"),
    ("fp4_gemm_backend", "--fp4-gemm-backend"),
    ("tool_call_parser", "--tool-call-parser"),
    ("reasoning_parser", "--reasoning-parser"),
    ("mem_fraction_static", "--mem-fraction-static"),
    ("context_length", "--context-length"),
    ("max_running_requests", "--max-running-requests"),
)
SPECULATIVE_FLAGS = (
    ("algorithm", "--speculative-algorithm"),
    ("draft_model_path", "--speculative-draft-model-path"),
    ("num_steps", "--speculative-num-steps"),
    ("eagle_topk", "--speculative-eagle-topk"),
    ("num_draft_tokens", "--speculative-num-draft-tokens"),
)


class RenderError(ValueError):
    """A rendered word would break the unit, the environment file or the argv (a control character)."""


def control_characters(text):
    """Names of the control characters in TEXT, e.g. ['\\n (line feed) at 12'], [] when clean.

    One definition for every string that reaches the unit, the environment file or the argv: Unicode
    categories Cc (C0/C1 controls: NUL, TAB, LF, CR, ESC, DEL, NEL, ...), Zl and Zp (line and paragraph
    separators). A line break splits ExecStart= or an environment line; NUL ends the string in C;
    the others are invisible in logs and never meant.
    """
    found = []
    for position, char in enumerate(str(text)):
        category = unicodedata.category(char)
        if category in ("Cc", "Zl", "Zp"):
            name = unicodedata.name(char, "") or _C0_NAMES.get(ord(char), "control character")
            found.append("%s (%s) at %d" % (repr(char)[1:-1], name.lower(), position))
    return found


# unicodedata has no names for C0/C1 controls.
_C0_NAMES = {0: "NUL", 7: "bell", 8: "backspace", 9: "tab", 10: "line feed", 11: "vertical tab",
             12: "form feed", 13: "carriage return", 27: "escape", 127: "delete", 133: "next line"}


def check_rendered(rendered):
    """Raise RenderError when a word of RENDERED (render()'s result) holds a control character.

    Defence in depth: the preflight rule `control-characters` refuses such input with the variable to
    fix before anything is rendered; this is the renderer refusing to write what slipped through."""
    for index, word in enumerate(rendered.get("argv") or []):
        bad = control_characters(word)
        if bad:
            raise RenderError("argv word %d %r holds %s" % (index, word, ", ".join(bad)))
    for key, value in (rendered.get("env") or {}).items():
        for what, text in (("name", key), ("value", value)):
            bad = control_characters(text)
            if bad:
                raise RenderError("environment %s %r holds %s" % (what, key, ", ".join(bad)))


def _mapping(value):
    """A profile section as a dict: a wrongly shaped one renders as absent (the schema rule names it)."""
    return value if isinstance(value, dict) else {}


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return repr(value)  # 4.0 stays "4.0"
    return str(value)


def render(profile, table=None, version=None, api_key_set=False, node=None, check=True):
    """Return {'argv': [...], 'origins': [...], 'env': {...}, 'rewrites': [...]} for PROFILE.

    TABLE: sglang_flags.FlagTable of the release that will run (None when unknown); VERSION: its
    release string. API_KEY_SET: put `--api-key ${GPUFLEET_SGLANG_API_KEY}` in the argv (systemd
    expands it from the 0600 environment file, so the key is never in the unit file).
    NODE: {'node_rank': R, 'dist_init_addr': 'HOST:PORT'} of this host when the profile has
    nnodes > 1 (multi-node tensor parallel): every rank gets the same argv plus its --node-rank.
    ORIGINS: for every argv word, the profile key path it came from (('speculative', 'eagle_topk'),
    ('extra_args', 3), ('llm_server_api_key',), ('nnodes',)), so a problem found in the argv names the
    variable to fix. CHECK: refuse control characters (RenderError); the preflight module renders
    unchecked first, to report every problem with its variable, and checks what it returns.
    """
    profile = profile if isinstance(profile, dict) else {}
    argv, origins, rewrites = [], [], []
    env = {str(k): _text(v) for k, v in _mapping(profile.get("env")).items()}
    vt = version_tuple(version)

    def add(origin, *words):
        argv.extend(words)
        origins.extend([origin] * len(words))

    for key, flag in VALUE_FLAGS:
        value = profile.get(key)
        if value is None or value == "":
            continue
        add((key,), flag, _text(value))

    spec = _mapping(profile.get("speculative"))
    if spec.get("algorithm"):
        for key, flag in SPECULATIVE_FLAGS:
            if spec.get(key) is not None and spec.get(key) != "":
                add(("speculative", key), flag, _text(spec[key]))
        if spec.get("spec_v2"):
            if vt is not None and vt >= (0, 5, 14, 0):
                rewrites.append(("speculative.spec_v2", True,
                                 "SGLANG_ENABLE_SPEC_V2 not set (removed in SGLang 0.5.14, no effect)"))
            else:
                env.setdefault("SGLANG_ENABLE_SPEC_V2", "True")

    hicache = _mapping(profile.get("hicache"))
    if hicache.get("enabled"):
        add(("hicache", "enabled"), "--enable-hierarchical-cache")
        if hicache.get("size_gb") is not None:
            add(("hicache", "size_gb"), "--hicache-size", _text(hicache["size_gb"]))
        elif hicache.get("ratio") is not None:
            add(("hicache", "ratio"), "--hicache-ratio", _text(hicache["ratio"]))
        if hicache.get("write_policy"):
            add(("hicache", "write_policy"), "--hicache-write-policy", _text(hicache["write_policy"]))

    allreduce = _mapping(profile.get("allreduce"))
    if allreduce.get("flashinfer_fusion"):
        if table is not None and table.get("--flashinfer-allreduce-fusion-backend") is not None:
            add(("allreduce", "flashinfer_fusion"), "--flashinfer-allreduce-fusion-backend", "auto")
            rewrites.append(("allreduce.flashinfer_fusion", True,
                             "--enable-flashinfer-allreduce-fusion is deprecated in this release; rendered as "
                             "--flashinfer-allreduce-fusion-backend auto"))
        else:
            add(("allreduce", "flashinfer_fusion"), "--enable-flashinfer-allreduce-fusion")
    if allreduce.get("disable_custom_all_reduce"):
        add(("allreduce", "disable_custom_all_reduce"), "--disable-custom-all-reduce")
    if allreduce.get("torch_symm_mem"):
        add(("allreduce", "torch_symm_mem"), "--enable-torch-symm-mem")
    if profile.get("disable_radix_cache"):
        add(("disable_radix_cache",), "--disable-radix-cache")

    nnodes = profile.get("nnodes")
    if isinstance(nnodes, int) and nnodes > 1 and node and node.get("node_rank") is not None:
        add(("nnodes",), "--dist-init-addr", _text(node.get("dist_init_addr")), "--nnodes", _text(nnodes),
            "--node-rank", _text(node["node_rank"]))
    if profile.get("host"):
        add(("host",), "--host", _text(profile["host"]))
    if profile.get("port") is not None:
        add(("port",), "--port", _text(profile["port"]))
    if api_key_set:
        add(("llm_server_api_key",), "--api-key", API_KEY_PLACEHOLDER)
    extra = profile.get("extra_args")
    for index, word in enumerate(extra if isinstance(extra, list) else []):
        add(("extra_args", index), _text(word))
    rendered = {"argv": argv, "origins": origins, "env": env, "rewrites": rewrites}
    if check:
        check_rendered(rendered)
    return rendered


def systemd_quote(argv):
    """Join ARGV into an ExecStart= command line (systemd.service(5) "Command lines").

    Every word is double-quoted; `\\` and `"` are escaped, `%` (specifiers) doubled to `%%`, `$`
    doubled to `$$` so systemd does not expand it, except the API key placeholder, which systemd
    must expand from the environment file. A word with a control character (a line break would end
    ExecStart= mid-word) raises RenderError; the preflight rule `control-characters` refuses it first.
    """
    words = []
    for arg in argv:
        bad = control_characters(arg)
        if bad:
            raise RenderError("ExecStart word %r holds %s" % (arg, ", ".join(bad)))
        if arg == API_KEY_PLACEHOLDER:
            words.append(arg)
            continue
        escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
        words.append('"%s"' % escaped)
    return " ".join(words)
