# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render a model profile (llm_server_models entry) into SGLang's argv and environment.

One function, `render()`, used by the preflight module (to check the argv against the installed
release's real flag definitions) and by the sglang_service role (which writes exactly this argv into
the unit): what is checked is what runs. Release-dependent spellings are chosen here, from the flag
table when the release is known (see `REWRITES` in sglang_preflight.py for the reasons and sources).
"""

from __future__ import annotations

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


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return repr(value)  # 4.0 stays "4.0"
    return str(value)


def render(profile, table=None, version=None, api_key_set=False, node=None):
    """Return {'argv': [...], 'env': {...}, 'rewrites': [...]} for PROFILE.

    TABLE: sglang_flags.FlagTable of the installed release (None before SGLang is installed);
    VERSION: its release string. API_KEY_SET: put `--api-key ${GPUFLEET_SGLANG_API_KEY}` in the argv
    (systemd expands it from the 0600 environment file, so the key is never in the unit file).
    NODE: {'node_rank': R, 'dist_init_addr': 'HOST:PORT'} of this host when the profile has
    nnodes > 1 (multi-node tensor parallel): every rank gets the same argv plus its --node-rank.
    """
    profile = profile or {}
    argv, rewrites = [], []
    env = {str(k): _text(v) for k, v in (profile.get("env") or {}).items()}
    vt = version_tuple(version)
    has = (lambda flag: table.get(flag) is not None) if table is not None else (lambda flag: True)

    for key, flag in VALUE_FLAGS:
        value = profile.get(key)
        if value is None or value == "":
            continue
        argv += [flag, _text(value)]

    spec = profile.get("speculative") or {}
    if spec.get("algorithm"):
        for key, flag in SPECULATIVE_FLAGS:
            if spec.get(key) is not None and spec.get(key) != "":
                argv += [flag, _text(spec[key])]
        if spec.get("spec_v2"):
            if vt is not None and vt >= (0, 5, 14, 0):
                rewrites.append("speculative.spec_v2: SGLANG_ENABLE_SPEC_V2 not set (removed in SGLang 0.5.14, no effect)")
            else:
                env.setdefault("SGLANG_ENABLE_SPEC_V2", "True")

    hicache = profile.get("hicache") or {}
    if hicache.get("enabled"):
        argv.append("--enable-hierarchical-cache")
        if hicache.get("size_gb") is not None:
            argv += ["--hicache-size", _text(hicache["size_gb"])]
        elif hicache.get("ratio") is not None:
            argv += ["--hicache-ratio", _text(hicache["ratio"])]
        if hicache.get("write_policy"):
            argv += ["--hicache-write-policy", _text(hicache["write_policy"])]

    allreduce = profile.get("allreduce") or {}
    if allreduce.get("flashinfer_fusion"):
        if table is not None and table.get("--flashinfer-allreduce-fusion-backend") is not None:
            argv += ["--flashinfer-allreduce-fusion-backend", "auto"]
            rewrites.append("allreduce.flashinfer_fusion: --enable-flashinfer-allreduce-fusion is deprecated in this "
                            "release; rendered as --flashinfer-allreduce-fusion-backend auto")
        else:
            argv.append("--enable-flashinfer-allreduce-fusion")
    if allreduce.get("disable_custom_all_reduce"):
        argv.append("--disable-custom-all-reduce")
    if allreduce.get("torch_symm_mem"):
        argv.append("--enable-torch-symm-mem")
    if profile.get("disable_radix_cache"):
        argv.append("--disable-radix-cache")

    nnodes = profile.get("nnodes")
    if isinstance(nnodes, int) and nnodes > 1 and node and node.get("node_rank") is not None:
        argv += ["--dist-init-addr", _text(node.get("dist_init_addr")), "--nnodes", _text(nnodes),
                 "--node-rank", _text(node["node_rank"])]
    if profile.get("host"):
        argv += ["--host", _text(profile["host"])]
    if profile.get("port") is not None:
        argv += ["--port", _text(profile["port"])]
    if api_key_set:
        argv += ["--api-key", API_KEY_PLACEHOLDER]
    argv += [_text(a) for a in (profile.get("extra_args") or [])]
    if not has("--fp4-gemm-backend") and profile.get("fp4_gemm_backend"):
        rewrites.append("fp4_gemm_backend: this release has no --fp4-gemm-backend (added in 0.5.8)")
    return {"argv": argv, "env": env, "rewrites": rewrites}


def systemd_quote(argv):
    """Join ARGV into an ExecStart= command line (systemd.service(5) "Command lines").

    Every word is double-quoted; `\\` and `"` are escaped, `%` (specifiers) doubled to `%%`, `$`
    doubled to `$$` so systemd does not expand it, except the API key placeholder, which systemd
    must expand from the environment file. Newlines are refused by the profile validation.
    """
    words = []
    for arg in argv:
        if arg == API_KEY_PLACEHOLDER:
            words.append(arg)
            continue
        escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
        words.append('"%s"' % escaped)
    return " ".join(words)
