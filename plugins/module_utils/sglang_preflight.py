# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Preflight validation of a model profile against the host and the installed SGLang.

The rules are data: `RULES` below is one table (id, severity, what it checks, source), each row
pointing at a small function `check_*(ctx)` that returns problems. `validate()` runs every rule
and returns every problem at once; each names the variable, its value, the reason and the fix.

Sources cited per rule: "seed" = an incident in the original deployment notes (each crashed a
server that takes ~10 minutes to start); "sglang X" = the file/behaviour in SGLang's code of that
release (see docs/model-profiles.md and shared sglang-facts).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_flags import (
    FlagSourceError, check_argv, load_flag_table, version_tuple)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import (
    SPECULATIVE_FLAGS, VALUE_FLAGS, render)

ERROR, WARNING = "error", "warning"

# ------------------------------------------------------------------------------------------------
# Profile schema: key -> (types, required, description). Nested dicts have their own schema.
# ------------------------------------------------------------------------------------------------
_NUM = (int, float)
PROFILE_SCHEMA = {
    "model_path": (str, True, "absolute path of the model directory on the host"),
    "hub_repo": (str, False, "Hugging Face repo to download into model_path (model_download)"),
    "hub_revision": (str, False, "branch, tag or commit of hub_repo"),
    "expected_shards": (int, False, "number of *.safetensors shards a complete download has"),
    "expected_size_gb": (_NUM, False, "approximate size of a complete download in GB"),
    "architectures": (list, False, "config.json architectures, when the model is not on the host yet"),
    "served_model_name": (str, True, "name clients use in the OpenAI API (model field)"),
    "tp_size": (int, True, "tensor-parallel size (GPUs per replica)"),
    "quantization": (str, False, "--quantization"),
    "attention_backend": (str, False, "--attention-backend"),
    "moe_runner_backend": (str, False, "--moe-runner-backend"),
    "fp4_gemm_backend": (str, False, "--fp4-gemm-backend"),
    "tool_call_parser": (str, False, "--tool-call-parser"),
    "reasoning_parser": (str, False, "--reasoning-parser"),
    "speculative": (dict, False, "speculative decoding settings"),
    "hicache": (dict, False, "hierarchical (host RAM) KV cache"),
    "mem_fraction_static": (_NUM, False, "--mem-fraction-static (0 < x < 1)"),
    "context_length": (int, False, "--context-length"),
    "max_running_requests": (int, False, "--max-running-requests"),
    "allreduce": (dict, False, "all-reduce options"),
    "disable_radix_cache": (bool, False, "--disable-radix-cache"),
    "host": (str, False, "listen address (default 127.0.0.1)"),
    "port": (int, False, "listen port (default 30000)"),
    "allow_unauthenticated": (bool, False, "allow a non-loopback host without an API key"),
    "env": (dict, False, "environment variables of the server (NCCL_*, SGLANG_*)"),
    "extra_args": (list, False, "extra SGLang flags, one list item per argv word"),
    "notes": (dict, False, "why each value is set (copied into the deployment record)"),
    "smoke_test": (dict, False, "settings of the smoke-test role (never affect the server)"),
    "nnodes": (int, False, "nodes one server spans (multi-node tensor parallel; docs/fleet.md)"),
    "dist_init_port": (int, False, "rendezvous port on rank 0 for multi-node (default 5000)"),
}
SPECULATIVE_SCHEMA = {
    "algorithm": (str, True, "EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM"),
    "draft_model_path": (str, False, "draft model directory (EAGLE/EAGLE3/STANDALONE)"),
    "num_steps": (int, False, "--speculative-num-steps"),
    "eagle_topk": (int, False, "--speculative-eagle-topk"),
    "num_draft_tokens": (int, False, "--speculative-num-draft-tokens"),
    "spec_v2": (bool, False, "overlap scheduler for speculative decoding (SGLANG_ENABLE_SPEC_V2)"),
}
HICACHE_SCHEMA = {
    "enabled": (bool, True, "--enable-hierarchical-cache"),
    "ratio": (_NUM, False, "--hicache-ratio: host pool / device pool"),
    "size_gb": (_NUM, False, "--hicache-size: host pool GB per TP rank (overrides ratio)"),
    "write_policy": (str, False, "--hicache-write-policy"),
    "kv_pool_gb_per_rank": (_NUM, False, "measured device KV pool per rank (GB), to size the host pool"),
}
ALLREDUCE_SCHEMA = {
    "flashinfer_fusion": (bool, False, "FlashInfer all-reduce fusion"),
    "disable_custom_all_reduce": (bool, False, "--disable-custom-all-reduce"),
    "torch_symm_mem": (bool, False, "--enable-torch-symm-mem (needs the SM120 patch on SM120)"),
}
NESTED = {"speculative": SPECULATIVE_SCHEMA, "hicache": HICACHE_SCHEMA, "allreduce": ALLREDUCE_SCHEMA}

# Known flag renames (seed spelling -> real spelling), checked even before SGLang is installed.
FLAG_DRIFT = {
    "--fp4-gemm-runner-backend": "--fp4-gemm-backend",  # dest fp4_gemm_runner_backend; flag since 0.5.8
    "--tp": "--tp-size",  # only works by argparse prefix matching
    "--enable-hicache": "--enable-hierarchical-cache",  # alias only in newer releases
}
# Architectures with hybrid Gated-DeltaNet attention (sglang/srt/configs/model_config.py, hybrid_arch.py).
HYBRID_GDN_PREFIXES = ("Qwen3Next", "Qwen3_5")
# Attention backends SGLang accepts for hybrid GDN models on Blackwell, per release
# (sglang/srt/layers/attention/attention_registry.py; verified by tests against 0.5.10.post1 / 0.5.23).
GDN_BLACKWELL_BACKENDS = (
    ((0, 5, 6, -1), (0, 5, 10, -1), {"triton", "trtllm_mha"}),
    ((0, 5, 10, -1), (0, 5, 17, -1), {"triton", "trtllm_mha", "fa4", "flashinfer"}),
    ((0, 5, 17, -1), (9, 9, 9, 0), {"triton", "trtllm_mha", "flashinfer"}),
)
# SM120 (RTX PRO 6000, RTX 50xx) has no tcgen05: TRT-LLM kernels do not run there (sglang-facts).
SM120_UNSUPPORTED_PREFIX = "trtllm"
NVFP4_QUANTIZATIONS = {"modelopt_fp4", "nvfp4_online"}
FP4_GEMM_BAD_ON_SM120 = {
    "flashinfer_cutlass": "races under concurrency on SM120: 'NaN happened' / '!!!!' output (seed; flashinfer#2708)",
    "flashinfer_trtllm": "TRT-LLM kernels need tcgen05, which SM120 lacks",
}
HICACHE_RESERVE_GB = 10  # SGLang holds ~10 GB host RAM back when sizing the host pool (hicache memory check)
LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


class Context:
    """Everything the rules look at."""

    def __init__(self, name, profiles, facts=None, table=None, version=None, api_key_set=False,
                 model_config=None, expected_gpu_count=None, flags_error=None, node=None):
        self.name = name
        self.profiles = profiles or {}
        self.profile = self.profiles.get(name) if isinstance(self.profiles, dict) else None
        self.facts = facts or {}
        self.table = table
        self.version = version
        self.vt = version_tuple(version)
        self.api_key_set = api_key_set
        self.model_config = model_config or {}
        self.expected_gpu_count = expected_gpu_count
        self.flags_error = flags_error
        self.node = node or {}  # multi-node: node_rank, dist_init_addr, gpu_counts (one per node)
        self.rendered = None

    # -- helpers
    def var(self, *keys):
        return "llm_server_models['%s']%s" % (self.name, "".join(".%s" % k for k in keys))

    def get(self, *keys):
        node = self.profile or {}
        for key in keys:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node

    @property
    def gpus(self):
        return [d for d in (self.facts.get("devices") or []) if d.get("kind", "gpu") == "gpu"]

    @property
    def gpu_count(self):
        if self.facts.get("gpu_count") is not None:
            return int(self.facts["gpu_count"])
        return len(self.gpus) if self.gpus else None

    @property
    def capability_majors(self):
        majors = set()
        for dev in self.gpus:
            cap = str(dev.get("compute_capability") or "")
            major = cap.split(".", maxsplit=1)[0]
            if major.isdigit():
                majors.add(int(major))
        return majors

    @property
    def is_blackwell(self):
        return bool(self.capability_majors & {10, 11, 12})

    @property
    def is_sm120(self):
        return 12 in self.capability_majors

    @property
    def architectures(self):
        archs = self.model_config.get("architectures") or self.get("architectures") or []
        return [str(a) for a in archs]

    @property
    def is_hybrid_gdn(self):
        return any(a.startswith(HYBRID_GDN_PREFIXES) for a in self.architectures)

    @property
    def is_nvfp4(self):
        if self.get("quantization") in NVFP4_QUANTIZATIONS:
            return True
        qcfg = self.model_config.get("quantization_config") or {}
        return str(qcfg.get("quant_algo", "")).upper() == "NVFP4"


def problem(rule, severity, variable, value, reason, fix):
    return {"rule": rule["id"], "severity": severity, "variable": variable, "value": value,
            "reason": reason, "fix": fix, "source": rule["source"]}


# ------------------------------------------------------------------------------------------------
# Rule functions: each takes (rule, ctx) and returns a list of problems.
# ------------------------------------------------------------------------------------------------
def check_profile_exists(rule, ctx):
    if not isinstance(ctx.profiles, dict) or not ctx.profiles:
        return [problem(rule, ERROR, "llm_server_models", ctx.profiles, "no model profiles are defined",
                        "define llm_server_models in group_vars/llm_servers/models.yml")]
    if ctx.profile is None:
        return [problem(rule, ERROR, "llm_server_model", ctx.name, "names no profile in llm_server_models",
                        "use one of %s" % sorted(ctx.profiles))]
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", str(ctx.name)):
        return [problem(rule, ERROR, "llm_server_model", ctx.name,
                        "profile names become unit names (sglang-<name>.service)",
                        "rename the profile using letters, digits, '.', '_' and '-' only")]
    if not isinstance(ctx.profile, dict):
        return [problem(rule, ERROR, ctx.var(), ctx.profile, "a profile must be a mapping", "see the profile schema")]
    return []


def _type_name(types):
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join({"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                        "list": "list", "dict": "mapping"}[t.__name__] for t in types)


def _check_schema(rule, ctx, node, schema, path):
    out = []
    for key, value in node.items():
        if key not in schema:
            out.append(problem(rule, ERROR, ctx.var(*path, key), value, "unknown profile key",
                               "remove it or use one of %s (roles/sglang_service/README.md)" % sorted(schema)))
            continue
        types = schema[key][0]
        types_t = types if isinstance(types, tuple) else (types,)
        bad_bool = isinstance(value, bool) and bool not in types_t
        if value is not None and (bad_bool or not isinstance(value, types_t)):
            out.append(problem(rule, ERROR, ctx.var(*path, key), value, "must be a %s" % _type_name(types),
                               "set %s to a %s (%s)" % (key, _type_name(types), schema[key][2])))
        elif isinstance(value, dict) and key in NESTED:
            out += _check_schema(rule, ctx, value, NESTED[key], path + (key,))
    for key, (types, required, desc) in schema.items():
        if required and node.get(key) in (None, ""):
            out.append(problem(rule, ERROR, ctx.var(*path, key), None, "is required",
                               "set %s (%s)" % (key, desc)))
    return out


def check_schema(rule, ctx):
    return _check_schema(rule, ctx, ctx.profile, PROFILE_SCHEMA, ())


def check_ranges(rule, ctx):
    out = []
    tp = ctx.get("tp_size")
    if isinstance(tp, int) and tp < 1:
        out.append(problem(rule, ERROR, ctx.var("tp_size"), tp, "must be at least 1", "set tp_size to 1..GPU count"))
    mem = ctx.get("mem_fraction_static")
    if isinstance(mem, _NUM) and not isinstance(mem, bool) and not 0 < mem < 1:
        out.append(problem(rule, ERROR, ctx.var("mem_fraction_static"), mem, "must be between 0 and 1 (exclusive)",
                           "use e.g. 0.88 (fraction of GPU memory for weights + KV cache)"))
    port = ctx.get("port")
    if isinstance(port, int) and not 1 <= port <= 65535:
        out.append(problem(rule, ERROR, ctx.var("port"), port, "is not a TCP port", "use 1..65535"))
    path = ctx.get("model_path")
    if isinstance(path, str) and path and not path.startswith("/"):
        out.append(problem(rule, ERROR, ctx.var("model_path"), path, "must be an absolute path",
                           "use the model directory's absolute path on the host"))
    for key in ("context_length", "max_running_requests", "expected_shards"):
        value = ctx.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            out.append(problem(rule, ERROR, ctx.var(key), value, "must be a positive integer", "remove it or set it > 0"))
    for key in ("num_steps", "eagle_topk", "num_draft_tokens"):
        value = ctx.get("speculative", key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            out.append(problem(rule, ERROR, ctx.var("speculative", key), value, "must be >= 1", "set it to 1 or more"))
    for key in ("ratio", "size_gb"):
        value = ctx.get("hicache", key)
        if isinstance(value, _NUM) and not isinstance(value, bool) and value <= (1 if key == "ratio" else 0):
            out.append(problem(rule, ERROR, ctx.var("hicache", key), value,
                               "host pool must exceed the device pool" if key == "ratio" else "must be > 0",
                               "use a ratio > 1 (SGLang default 2.0)" if key == "ratio" else "set a size in GB"))
    for key, value in (ctx.get("env") or {}).items() if isinstance(ctx.get("env"), dict) else []:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)) or "\n" in str(value):
            out.append(problem(rule, ERROR, ctx.var("env", key), value, "not a valid environment variable",
                               "use NAME: value with NAME matching [A-Za-z_][A-Za-z0-9_]* and a one-line value"))
    for i, arg in enumerate(ctx.get("extra_args") or []) if isinstance(ctx.get("extra_args"), list) else []:
        if not isinstance(arg, (str, int, float)) or "\n" in str(arg):
            out.append(problem(rule, ERROR, ctx.var("extra_args") + "[%d]" % i, arg, "must be a one-line string",
                               "give each argv word as its own list item, e.g. ['--chunked-prefill-size', '8192']"))
    return out


def _check_tp_multinode(rule, ctx, tp, nnodes):
    """nnodes > 1: tp_size spreads over all nodes, tp_size / nnodes ranks (GPUs) on each.

    The node facts (ctx.node: rank, rendezvous address, GPUs of every node) come from the preflight
    role's multinode.yml, which also refuses a host without a node group; without them only this
    host's GPUs are compared with tp_size / nnodes.
    """
    if tp % nnodes:
        return [problem(rule, ERROR, ctx.var("tp_size"), tp, "is not a multiple of nnodes=%d (each node runs "
                        "tp_size / nnodes ranks)" % nnodes, "set tp_size to a multiple of %d" % nnodes)]
    per_node = tp // nnodes
    counts = ctx.node.get("gpu_counts") or []
    known = [int(c) for c in counts if c]
    if counts and len(known) == len(counts) and sum(known) < tp:
        return [problem(rule, ERROR, ctx.var("tp_size"), tp, "exceeds the %d GPUs of all %d nodes (%s)"
                        % (sum(known), nnodes, ", ".join(str(c) for c in known)),
                        "lower tp_size to at most %d, or add nodes" % (min(known) * nnodes))]
    count = ctx.gpu_count or (int(ctx.expected_gpu_count) if ctx.expected_gpu_count else 0)
    if count and per_node > count:
        return [problem(rule, ERROR, ctx.var("tp_size"), tp, "needs %d GPUs per node (tp_size / nnodes) but "
                        "this node has %d" % (per_node, count),
                        "lower tp_size to %d, or raise nnodes" % (count * nnodes))]
    return []


def check_tp_vs_gpus(rule, ctx):
    tp = ctx.get("tp_size")
    if not isinstance(tp, int):
        return []
    nnodes = ctx.get("nnodes")
    if isinstance(nnodes, int) and nnodes > 1:
        return _check_tp_multinode(rule, ctx, tp, nnodes)
    count, where = ctx.gpu_count, "GPUs reported by gpu_info"
    if not count:  # no facts, or no GPU visible yet (driver not installed): trust the inventory
        count, where = ctx.expected_gpu_count, "GPUs of llm_server_expected_gpu_count"
        if not count:  # 0/unset: a host without GPUs by design (test containers); nothing to compare
            return []
        count = int(count)
    nnodes = ctx.get("nnodes") if isinstance(ctx.get("nnodes"), int) and ctx.get("nnodes") > 1 else 1
    if nnodes > 1:  # tensor parallel spans the nodes: tp_size GPUs over nnodes hosts like this one
        count, where = count * nnodes, "%s x %d nodes" % (where, nnodes)
    if count is not None and tp > count:
        return [problem(rule, ERROR, ctx.var("tp_size"), tp, "exceeds the %d %s" % (count, where),
                        "lower tp_size to at most %d, or serve this model on a host with more GPUs" % count)]
    return []


def _parser_choices(ctx, flag):
    return ctx.table.choices_of(flag) if ctx.table is not None else None


def check_parsers(rule, ctx):
    out = []
    for key, flag in (("tool_call_parser", "--tool-call-parser"), ("reasoning_parser", "--reasoning-parser")):
        value = ctx.get(key)
        if not value:
            continue
        choices = _parser_choices(ctx, flag)
        if choices is not None and value not in choices:
            out.append(problem(rule, ERROR, ctx.var(key), value,
                               "is not a %s of SGLang %s" % (key.replace("_", " "), ctx.version or "(installed)"),
                               "use one of %s" % sorted(choices)))
    if ctx.get("tool_call_parser") == "qwen3" and ctx.table is None:
        out.append(problem(rule, ERROR, ctx.var("tool_call_parser"), "qwen3",
                           "'qwen3' is a reasoning parser, not a tool-call parser in any SGLang release",
                           "Qwen3.5 / Qwen3-Coder emit <tool_call><function=...> XML: use qwen3_coder"))
    return out


def check_flag_drift(rule, ctx):
    out = []
    argv = ctx.rendered["argv"]
    for i, word in enumerate(argv):
        option = str(word).split("=", 1)[0]
        if option in FLAG_DRIFT and (ctx.table is None or ctx.table.get(option) is None):
            out.append(problem(rule, ERROR, ctx.var("extra_args"), word, "flag is spelled %s in SGLang" % FLAG_DRIFT[option],
                               "replace %s with %s" % (option, FLAG_DRIFT[option])))
    if ctx.table is None:
        return out
    seen = {p["value"] for p in out}
    for item in check_argv(ctx.table, argv):
        if item["flag"] in seen or item["value"] in seen:
            continue
        if item["reason"] == "not defined by this SGLang release":
            hint = ("did you mean %s?" % " / ".join(item["suggestions"])) if item["suggestions"] else \
                "remove it (see `python -m sglang.launch_server --help` of this release)"
            out.append(problem(rule, ERROR, _var_for_flag(ctx, item["flag"]), item["flag"],
                               "SGLang %s does not define %s" % (ctx.version or "(installed)", item["flag"]), hint))
        else:
            fix = "use one of %s" % item["suggestions"] if item["suggestions"] else "fix the value"
            out.append(problem(rule, ERROR, _var_for_flag(ctx, item["flag"]), item["value"],
                               "%s %s for SGLang %s" % (item["flag"], item["reason"], ctx.version or "(installed)"), fix))
    return out


def _var_for_flag(ctx, flag):
    for key, name in VALUE_FLAGS:
        if name == flag:
            return ctx.var(key)
    for key, name in SPECULATIVE_FLAGS:
        if name == flag:
            return ctx.var("speculative", key)
    if flag.startswith("--hicache") or flag == "--enable-hierarchical-cache":
        return ctx.var("hicache")
    return ctx.var("extra_args")


def check_deprecated(rule, ctx):
    out = []
    env = ctx.get("env") or {}
    if ctx.vt is not None and ctx.vt >= (0, 5, 14, 0) and isinstance(env, dict) and "SGLANG_ENABLE_SPEC_V2" in env:
        out.append(problem(rule, WARNING, ctx.var("env", "SGLANG_ENABLE_SPEC_V2"), env["SGLANG_ENABLE_SPEC_V2"],
                           "SGLANG_ENABLE_SPEC_V2 was removed in SGLang 0.5.14 and has no effect",
                           "remove it from env (spec v2 is chosen by SGLang itself from 0.5.14)"))
    for text in ctx.rendered["rewrites"]:
        out.append(problem(rule, WARNING, ctx.var(text.split(":", 1)[0]), None, text.split(":", 1)[1].strip(),
                           "nothing to do: the collection renders the spelling this release expects"))
    if "--enable-flashinfer-allreduce-fusion" in (ctx.get("extra_args") or []) and ctx.table is not None \
            and ctx.table.get("--flashinfer-allreduce-fusion-backend") is not None:
        out.append(problem(rule, WARNING, ctx.var("extra_args"), "--enable-flashinfer-allreduce-fusion",
                           "deprecated in this release (maps to --flashinfer-allreduce-fusion-backend=auto)",
                           "set allreduce.flashinfer_fusion: true instead of the raw flag"))
    return out


def _gdn_allowed(ctx):
    if ctx.vt is None:
        # Not installed yet: the backends every release accepts on Blackwell.
        allowed = set.intersection(*[set(row[2]) for row in GDN_BLACKWELL_BACKENDS])
    else:
        allowed = set()
        for low, high, backends in GDN_BLACKWELL_BACKENDS:
            if low <= ctx.vt < high:
                allowed = set(backends)
    if ctx.is_sm120:
        allowed = {b for b in allowed if not b.startswith(SM120_UNSUPPORTED_PREFIX)}
    return allowed


def check_gdn_attention(rule, ctx):
    if not (ctx.is_hybrid_gdn and ctx.is_blackwell):
        return []
    backend = ctx.get("attention_backend")
    allowed = _gdn_allowed(ctx)
    if backend in allowed:
        return []
    release = ctx.version or "any release (SGLang not installed yet)"
    return [problem(rule, ERROR, ctx.var("attention_backend"), backend,
                    "hybrid GDN model (%s) on Blackwell SM%s: SGLang %s accepts only %s; others crash start-up with "
                    "'AssertionError: ... only supported backends on Blackwell GPUs for hybrid GDN models'"
                    % (", ".join(ctx.architectures), "/".join(str(m) + "0" for m in sorted(ctx.capability_majors)),
                       release, sorted(allowed)),
                    "set attention_backend: triton (the working SM120 recipe)")]


def check_fp4_gemm(rule, ctx):
    if not (ctx.is_nvfp4 and ctx.is_sm120):
        return []
    backend = ctx.get("fp4_gemm_backend")
    if backend in FP4_GEMM_BAD_ON_SM120:
        return [problem(rule, ERROR, ctx.var("fp4_gemm_backend"), backend,
                        "NVFP4 on SM120: %s" % FP4_GEMM_BAD_ON_SM120[backend],
                        "set fp4_gemm_backend: flashinfer_cudnn with moe_runner_backend: flashinfer_cutlass")]
    if backend in (None, "", "auto"):
        return [problem(rule, WARNING, ctx.var("fp4_gemm_backend"), backend,
                        "NVFP4 on SM120 with the automatic FP4 GEMM choice: 'auto' picks different backends per "
                        "release, and flashinfer_cutlass gives NaN on SM120",
                        "pin fp4_gemm_backend: flashinfer_cudnn")]
    return []


def check_speculative(rule, ctx):
    spec = ctx.get("speculative") or {}
    if not isinstance(spec, dict) or not spec.get("algorithm"):
        return []
    out = []
    algorithm, topk = str(spec.get("algorithm")), spec.get("eagle_topk")
    if spec.get("spec_v2") and isinstance(topk, int) and topk > 1:
        out.append(problem(rule, ERROR, ctx.var("speculative", "eagle_topk"), topk,
                           "spec v2 (overlap scheduling) raises 'Spec v2 currently only supports topk = 1'",
                           "set speculative.eagle_topk: 1 (chain speculation), or spec_v2: false"))
    elif ctx.vt is not None and (0, 5, 11, -1) <= ctx.vt < (0, 5, 14, 0) and isinstance(topk, int) and topk > 1 \
            and str((ctx.get("env") or {}).get("SGLANG_ENABLE_SPEC_V2", "")).lower() not in ("0", "false"):
        out.append(problem(rule, ERROR, ctx.var("speculative", "eagle_topk"), topk,
                           "SGLang %s enables spec v2 by default, which supports only topk = 1" % ctx.version,
                           "set speculative.eagle_topk: 1, or env SGLANG_ENABLE_SPEC_V2: 'False'"))
    if algorithm.upper() in ("EAGLE", "EAGLE3", "STANDALONE") and not spec.get("draft_model_path"):
        out.append(problem(rule, ERROR, ctx.var("speculative", "draft_model_path"), None,
                           "%s needs a draft model" % algorithm,
                           "set speculative.draft_model_path to the draft model's directory"))
    return out


def check_hicache(rule, ctx):
    hicache = ctx.get("hicache") or {}
    if not isinstance(hicache, dict) or not hicache.get("enabled"):
        return []
    out = []
    extra = [str(a) for a in (ctx.get("extra_args") or [])]
    if ctx.get("disable_radix_cache") or "--disable-radix-cache" in extra:
        out.append(problem(rule, ERROR, ctx.var("disable_radix_cache"), True,
                           "HiCache extends the radix cache; SGLang refuses it with --disable-radix-cache",
                           "remove disable_radix_cache / --disable-radix-cache, or disable hicache"))
    tp = ctx.get("tp_size") if isinstance(ctx.get("tp_size"), int) else 1
    per_rank, how = None, ""
    if isinstance(hicache.get("size_gb"), _NUM):
        per_rank, how = float(hicache["size_gb"]), "hicache.size_gb"
    elif isinstance(hicache.get("kv_pool_gb_per_rank"), _NUM):
        ratio = float(hicache.get("ratio") or 2.0)
        per_rank = ratio * float(hicache["kv_pool_gb_per_rank"])
        how = "hicache.ratio %g x kv_pool_gb_per_rank %g" % (ratio, float(hicache["kv_pool_gb_per_rank"]))
    ram_mb = ctx.facts.get("memtotal_mb")
    if per_rank is None:
        out.append(problem(rule, WARNING, ctx.var("hicache"), hicache,
                           "cannot size the HiCache host pool (ratio of an unknown device pool)",
                           "set hicache.kv_pool_gb_per_rank (from the 'KV Cache is allocated' log line) or hicache.size_gb"))
    elif ram_mb:
        need = tp * per_rank + HICACHE_RESERVE_GB
        have = float(ram_mb) / 1024.0
        if need > have:
            out.append(problem(rule, ERROR, ctx.var("hicache"), hicache,
                               "host pool %d ranks x %.1f GB (%s) + %d GB reserve = %.0f GB exceeds the host's %.0f GB RAM"
                               % (tp, per_rank, how, HICACHE_RESERVE_GB, need, have),
                               "lower hicache.ratio/size_gb so tp_size x per-rank size + %d GB fits in RAM"
                               % HICACHE_RESERVE_GB))
    return out


def _is_loopback(host):
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listen_auth(rule, ctx):
    host = ctx.get("host") or "127.0.0.1"
    if _is_loopback(str(host)) or ctx.api_key_set or ctx.get("allow_unauthenticated"):
        return []
    return [problem(rule, ERROR, ctx.var("host"), host,
                    "listens beyond loopback without an API key: anyone on the network can use the model",
                    "set llm_server_api_key (vault), or host: 127.0.0.1 behind a proxy, or allow_unauthenticated: true")]


def check_flag_source(rule, ctx):
    if ctx.flags_error:
        return [problem(rule, ERROR, "sglang_dir", ctx.flags_error[0], ctx.flags_error[1],
                        "point sglang_dir at the installed `sglang` package directory, or leave it empty before install")]
    return []


def check_sm120_allreduce(rule, ctx):
    allreduce = ctx.get("allreduce") or {}
    if not (isinstance(allreduce, dict) and allreduce.get("flashinfer_fusion") and ctx.is_sm120):
        return []
    if ctx.vt is not None and ctx.vt < (0, 5, 14, 0):
        return [problem(rule, WARNING, ctx.var("allreduce", "flashinfer_fusion"), True,
                        "SGLang %s applies FlashInfer all-reduce fusion only on SM90/SM100: on SM120 it is a no-op"
                        % ctx.version,
                        "expect NCCL all-reduce%s" % (" (custom all-reduce is disabled too)"
                                                      if allreduce.get("disable_custom_all_reduce") else ""))]
    return []


# The rule table: order = report order. "needs": what must be known for the rule to run.
RULES = (
    {"id": "profile-exists", "fn": check_profile_exists, "stop": True,
     "checks": "llm_server_model names a profile; the name is unit-safe",
     "source": "collection contract (unit name sglang-<profile>.service)"},
    {"id": "schema", "fn": check_schema, "checks": "known keys, required keys, types",
     "source": "profile schema, roles/sglang_service/README.md"},
    {"id": "ranges", "fn": check_ranges, "checks": "value ranges (tp >= 1, 0 < mem fraction < 1, port, paths, env names)",
     "source": "SGLang argument semantics (server_args.py)"},
    {"id": "flag-source", "fn": check_flag_source, "checks": "the installed SGLang's flag definitions are readable",
     "source": "sglang/srt/server_args.py (<= 0.5.13), sglang/srt/arg_groups (>= 0.5.14)"},
    {"id": "tp-vs-gpus", "fn": check_tp_vs_gpus, "checks": "tp_size <= GPUs on the host",
     "source": "SGLang needs one GPU per tensor-parallel rank"},
    {"id": "parsers", "fn": check_parsers, "checks": "tool-call and reasoning parsers exist in the release",
     "source": "seed (kimi_k2 parser missing: raw <|tool_calls_section_begin|>; 'qwen3' used as tool parser); "
               "sglang function_call/parser_names.py, parser/reasoning_parser.py"},
    {"id": "flag-drift", "fn": check_flag_drift, "checks": "every rendered flag and value is defined by the release",
     "source": "seed (--fp4-gemm-runner-backend does not exist); argparse 'invalid choice' exits 2"},
    {"id": "deprecated", "fn": check_deprecated, "checks": "deprecated flags/env rewritten or warned per release",
     "source": "sglang 0.5.14: --enable-flashinfer-allreduce-fusion deprecated, SGLANG_ENABLE_SPEC_V2 removed"},
    {"id": "gdn-attention", "fn": check_gdn_attention,
     "checks": "hybrid GDN model on Blackwell uses an attention backend the release accepts",
     "source": "seed (flashinfer crashed Qwen3.5 start-up); sglang layers/attention/attention_registry.py"},
    {"id": "fp4-gemm-sm120", "fn": check_fp4_gemm, "checks": "NVFP4 on SM120 avoids FP4 GEMM backends giving NaN",
     "source": "seed ('NaN happened' with the default FP4 GEMM); flashinfer#2708"},
    {"id": "speculative", "fn": check_speculative, "checks": "spec v2 needs topk 1; EAGLE needs a draft model",
     "source": "seed (spec v2 + topk 4: 'Spec v2 currently only supports topk = 1'); sglang speculative worker"},
    {"id": "hicache", "fn": check_hicache, "checks": "HiCache host pool fits RAM; not with radix cache disabled",
     "source": "seed (HiCache sizing); sglang mem_cache hicache host pool check, server_args radix check"},
    {"id": "listen-auth", "fn": check_listen_auth, "checks": "non-loopback listen address needs an API key",
     "source": "sglang --api-key protects all but /health*, /metrics; default host 127.0.0.1"},
    {"id": "sm120-allreduce", "fn": check_sm120_allreduce, "checks": "FlashInfer fusion is a no-op on SM120 before 0.5.14",
     "source": "sglang 0.5.10.post1 server_args (fusion only on SM90/SM100, nnodes == 1)"},
)


def read_model_config(model_path):
    """config.json of a local model directory (architectures, quantization_config), or {}."""
    path = os.path.join(model_path or "", "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_table(sglang_dir):
    """(table, version, error): error is (value, reason) when SGLANG_DIR is set but unreadable."""
    if not sglang_dir:
        return None, None, None
    try:
        table = load_flag_table(sglang_dir)
    except FlagSourceError as exc:
        return None, None, (sglang_dir, str(exc))
    return table, table.version, None


def validate(ctx):
    """Run every rule; return {'errors': [...], 'warnings': [...], 'argv': [...], 'env': {...}}."""
    problems = []
    empty = {"argv": [], "env": {}, "rewrites": []}
    for rule in RULES:
        if rule["id"] != "profile-exists" and not isinstance(ctx.profile, dict):
            break
        if rule["id"] == "flag-drift":
            try:
                ctx.rendered = render(ctx.profile, ctx.table, ctx.version, ctx.api_key_set, node=ctx.node)
            except (AttributeError, TypeError, ValueError):
                ctx.rendered = None  # schema errors already reported; nothing sensible to render
        if ctx.rendered is None and rule["id"] in ("flag-drift", "deprecated"):
            continue
        found = rule["fn"](rule, ctx)
        problems += found
        if rule.get("stop") and found:
            break
    errors = [p for p in problems if p["severity"] == ERROR]
    warnings = [p for p in problems if p["severity"] == WARNING]
    rendered = ctx.rendered or empty
    return {"errors": errors, "warnings": warnings, "argv": rendered["argv"], "env": rendered["env"]}


def format_problem(p):
    value = "(unset)" if p["value"] is None else json.dumps(p["value"], default=str)
    return "[%s] %s = %s: %s. Fix: %s. (source: %s)" % (p["rule"], p["variable"], value, p["reason"], p["fix"], p["source"])
