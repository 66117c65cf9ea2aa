# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Preflight validation of a model profile against the host and the SGLang that will run.

The rules are data: `RULES` below is one table (id, what it checks, source), each row pointing at a
small function `check_*(rule, ctx)` that returns problems. `validate()` runs every rule and returns
every problem at once; each names the variable, its value, the reason and a concrete fix.

Rules judge the EFFECTIVE command line: the argv rendered from the profile keys plus extra_args,
parsed the way SGLang's argparse parses it (the last value of a flag wins, so extra_args could
override a checked key; a flag given twice is refused). Flag definitions come from the SGLang tree
on the host when there is one (sglang_dir), else from the release table generated from PyPI
releases (sglang_releases.py) for the release the build will have.

Sources cited per rule: "seed" = an incident in the original deployment notes (each crashed a
server that takes ~10 minutes to start); "sglang X" = the file/behaviour in SGLang's code of that
release (see docs/model-profiles.md and shared sglang-facts).
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import os
import re

from ansible_collections.gpufleet.llm_server.plugins.module_utils import model_manifest
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_flags import (
    BUILTIN_ALIASES, FlagSourceError, load_flag_table, parse_argv, version_tuple)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import (
    RenderError, SPECULATIVE_FLAGS, VALUE_FLAGS, check_rendered, control_characters, render)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import (
    EXACT, RELEASES, gdn_backends_every_release, release_table, releases_with, successor_of)

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
# Profile keys whose strings never reach the unit, the environment file or the argv.
NOT_RENDERED = {"notes", "smoke_test", "hub_repo", "hub_revision", "architectures"}
PROFILE_EXAMPLE = ("e.g. llm_server_models: {my-model: {model_path: /models/my-model, served_model_name: my-model, "
                   "tp_size: 1}} (schema: roles/sglang_service/README.md)")

# Known flag renames (seed spelling -> real spelling), checked even when no flag table is used.
FLAG_DRIFT = {
    "--fp4-gemm-runner-backend": "--fp4-gemm-backend",  # dest fp4_gemm_runner_backend; flag since 0.5.8
    "--tp": "--tp-size",  # only works by argparse prefix matching
}
# Architectures with hybrid Gated-DeltaNet attention (sglang/srt/configs/model_config.py, hybrid_arch.py).
HYBRID_GDN_PREFIXES = ("Qwen3Next", "Qwen3_5")
# SM120 (RTX PRO 6000, RTX 50xx) has no tcgen05: TRT-LLM kernels do not run there (sglang-facts).
SM120_UNSUPPORTED_PREFIX = "trtllm"
NVFP4_QUANTIZATIONS = {"modelopt_fp4", "nvfp4_online"}
FP4_GEMM_BAD_ON_SM120 = {
    "flashinfer_cutlass": "races under concurrency on SM120: 'NaN happened' / '!!!!' output (seed; flashinfer#2708)",
    "cutlass": "is the same CUTLASS FP4 GEMM family as flashinfer_cutlass, which gave 'NaN happened' on SM120 "
               "(seed; flashinfer#2708); no SM120-validated recipe uses it",
    "flashinfer_trtllm": "TRT-LLM kernels need tcgen05, which SM120 lacks",
}
HICACHE_RESERVE_GB = 10  # SGLang holds ~10 GB host RAM back when sizing the host pool (hicache memory check)
LOOPBACK_NAMES = {"localhost", "ip6-localhost"}
# gpufleet-launch's MIN_SECRET (roles/sglang_service/files/gpufleet-launch): shorter secrets cannot be redacted.
MIN_SECRET_LENGTH = 8
# Flags whose value is a secret (matched on the argparse dest): --api-key, --admin-api-key, --ssl-keyfile-password.
SECRET_DEST_RE = re.compile(r"(^|_)(api_key|password|passwd|secret|token)$")
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--ssl-keyfile-password")
# Environment names that hold secrets (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, OPENAI_API_KEY, WANDB_API_KEY, ...).
SECRET_ENV_RE = re.compile(r"(^|_)(TOKEN|API_?KEY|SECRET|SECRET_KEY|ACCESS_KEY|PASSWORD|PASSWD|PRIVATE_KEY|"
                           r"CREDENTIALS?)$", re.I)
# A Hugging Face user access token (hf_ + 34 letters and digits).
HF_TOKEN_VALUE_RE = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")
# Numeric flags whose value must be positive (flag, minimum, exclusive, fix).
POSITIVE_FLAGS = (
    ("--tp-size", 1, "set tp_size to 1..GPU count"),
    ("--context-length", 1, "remove context_length (the model's own) or set it > 0"),
    ("--max-running-requests", 1, "remove it or set it > 0"),
    ("--speculative-num-steps", 1, "set it to 1 or more"),
    ("--speculative-eagle-topk", 1, "set it to 1 or more"),
    ("--speculative-num-draft-tokens", 1, "set it to 1 or more"),
)
# The largest integer torch and CUDA take (int64): a larger integer flag value overflows in the server.
INT64_MAX = 2 ** 63 - 1
# config.json keys SGLang reads the context length from, in order (sglang/srt/utils/hf_transformers_utils.py
# CONTEXT_LENGTH_KEYS, 0.5.4 ... 0.5.23), and the sub-configs of multimodal models it reads them from.
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")
TEXT_CONFIG_KEYS = ("thinker_config", "llm_config", "language_config", "text_config")


class Context:
    """Everything the rules look at."""

    def __init__(self, name, profiles, facts=None, table=None, version=None, api_key_set=False,
                 model_config=None, expected_gpu_count=None, flags_error=None, node=None, inventory=None,
                 secrets=None, secret_env=None, unit_settings=None, extra_env=None, expected_compute_capability=None,
                 disk=None, release_match=EXACT, release_ref=None, flags_from=None, base_env=None):
        self.name = name
        self.profiles = profiles
        self.profile = profiles.get(name) if isinstance(profiles, dict) and _hashable(name) else None
        self.facts = facts or {}
        self.table = table
        self.version = version
        self.vt = version_tuple(version)
        self.api_key_set = api_key_set
        self.model_config = model_config or {}
        self.expected_gpu_count = expected_gpu_count
        self.expected_compute_capability = expected_compute_capability
        self.flags_error = flags_error
        self.node = node or {}  # multi-node: node_rank, dist_init_addr, gpu_counts (one per node)
        # inventory: hostname, host_address (ansible_host; absent when not set), placeholder_markers, inventory_dir
        self.inventory = inventory
        self.secrets = secrets or {}  # variable name -> value (only checked, never reported)
        self.secret_env = secret_env or {}  # sglang_service_secret_env: name -> value (values never reported)
        self.unit_settings = unit_settings or {}  # variable name -> value written into the unit
        self.extra_env = extra_env or {}  # sglang_service_extra_env: lands in the env file and the record
        self.base_env = base_env or {}  # cuda_toolkit_env: under the profile's env in the env file
        self.disk = disk  # read_disk(): {'free_bytes', 'have_bytes', 'state', 'where', 'margin_gb'} or None
        # How the flag table was chosen: 'exact' (this release / the tree on the host) or an approximation
        # (a branch ref checked against the newest tabulated release), and from which ref.
        self.release_match = release_match
        self.release_ref = release_ref
        self.flags_from = flags_from  # e.g. "release table" or "tree /opt/sglang/src/python/sglang"
        self.rendered = None
        self.occurrences = []
        self.argv_problems = []

    # -- profile access
    def var(self, *keys):
        out = "llm_server_models['%s']" % self.name
        for key in keys:
            out += "[%d]" % key if isinstance(key, int) else ".%s" % key
        return out

    def get(self, *keys):
        node = self.profile if isinstance(self.profile, dict) else {}
        for key in keys:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node

    # -- the effective command line
    @property
    def release(self):
        """How messages name the SGLang the argv was checked against."""
        name = "SGLang %s" % self.version if self.version else "the installed SGLang"
        return "%s (%s)" % (name, self.flags_from) if self.flags_from else name

    def key_of(self, flag):
        """Where argparse stores FLAG (its dest), or the flag itself without a table; None if the release lacks it."""
        if self.table is None:
            return BUILTIN_ALIASES.get(flag, flag)
        definition = self.table.get(flag)
        return None if definition is None else definition.dest

    def occurrences_of(self, flag):
        key = self.key_of(flag)
        return [o for o in self.occurrences if key is not None and o["key"] == key]

    def setting(self, flag):
        """(value, variable) of FLAG on the effective command line: the last occurrence wins (argparse).

        value: True for a switch, the word for a single value, the list for nargs flags, None when absent;
        variable: the profile key (or extra_args item) that put it there, or the key that would set it.
        """
        found = self.occurrences_of(flag)
        if not found:
            return None, self.var(*_profile_key_of(flag))
        last = found[-1]
        values = last["values"]
        if last["flag"] is not None and not last["flag"].takes_value:
            return not last["option"].startswith("--no-"), self.origin_var(last["index"])
        if last["flag"] is not None and last["flag"].nargs in ("+", "*"):
            value = values
        else:
            value = values[0] if values else (True if last["flag"] is None else None)
        # Blame the word that holds the value (extra_args ['--host', '0.0.0.0']: item 1).
        return value, self.origin_var(last["value_index"] if values else last["index"])

    def origin(self, index):
        """The profile key path that put argv word INDEX there: ('tp_size',), ('extra_args', 3), ..."""
        origins = (self.rendered or {}).get("origins") or []
        return origins[index] if 0 <= index < len(origins) else ("extra_args",)

    def origin_var(self, index):
        origin = self.origin(index)
        return "llm_server_api_key" if origin == ("llm_server_api_key",) else self.var(*origin)

    # -- host facts
    @property
    def gpus(self):
        return [d for d in (self.facts.get("devices") or []) if isinstance(d, dict) and d.get("kind", "gpu") == "gpu"]

    @property
    def gpu_count(self):
        if self.facts.get("gpu_count") is not None:
            return int(self.facts["gpu_count"])
        return len(self.gpus) if self.gpus else None

    @property
    def capabilities(self):
        """Compute capabilities as (major, minor) from gpu_info, else llm_server_expected_compute_capability."""
        caps = set()
        for dev in self.gpus:
            cap = _capability(dev.get("compute_capability"))
            if cap:
                caps.add(cap)
        if not caps and self.expected_compute_capability not in (None, ""):
            cap = _capability(self.expected_compute_capability)
            if cap:
                caps.add(cap)
        return caps

    @property
    def capability_source(self):
        if any(_capability(d.get("compute_capability")) for d in self.gpus):
            return "GPUs reported by gpu_info"
        return "llm_server_expected_compute_capability"

    @property
    def capability_majors(self):
        return {major for major, _minor in self.capabilities}

    @property
    def is_blackwell(self):
        return bool(self.capability_majors & {10, 11, 12})

    @property
    def is_sm120(self):
        return 12 in self.capability_majors

    # -- the model
    @property
    def architectures(self):
        archs = self.model_config.get("architectures") or self.get("architectures") or []
        return [str(a) for a in archs] if isinstance(archs, list) else []

    @property
    def is_hybrid_gdn(self):
        return any(a.startswith(HYBRID_GDN_PREFIXES) for a in self.architectures)

    def quantization(self):
        """(method, where): --quantization of the command line, else what config.json implies."""
        value, variable = self.setting("--quantization")
        if value:
            return str(value), variable
        qcfg = self.model_config.get("quantization_config") or {}
        if isinstance(qcfg, dict) and qcfg.get("quant_method"):
            method = str(qcfg["quant_method"]).lower()
            algo = str(qcfg.get("quant_algo", "")).upper()
            if method == "modelopt":
                method = "modelopt_fp4" if algo == "NVFP4" else "modelopt_fp8" if algo == "FP8" else method
            return method, "%s/config.json quantization_config" % (self.get("model_path") or "model_path")
        return None, self.var("quantization")

    @property
    def is_nvfp4(self):
        method, _where = self.quantization()
        if method in NVFP4_QUANTIZATIONS:
            return True
        qcfg = self.model_config.get("quantization_config") or {}
        return isinstance(qcfg, dict) and str(qcfg.get("quant_algo", "")).upper() == "NVFP4"


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _capability(text):
    match = re.match(r"^\s*(\d+)\.(\d+)\s*$", str(text if text is not None else ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def _profile_key_of(flag):
    for key, name in VALUE_FLAGS:
        if name == flag:
            return (key,)
    for key, name in SPECULATIVE_FLAGS:
        if name == flag:
            return ("speculative", key)
    return {"--host": ("host",), "--port": ("port",), "--enable-hierarchical-cache": ("hicache", "enabled"),
            "--hicache-ratio": ("hicache", "ratio"), "--hicache-size": ("hicache", "size_gb"),
            "--disable-radix-cache": ("disable_radix_cache",)}.get(flag, ("extra_args",))


def problem(rule, severity, variable, value, reason, fix):
    return {"rule": rule["id"], "severity": severity, "variable": variable, "value": value,
            "reason": reason, "fix": fix, "source": rule["source"]}


def _describe(value):
    """How a wrongly shaped value reads in a message (never a Python class name)."""
    if isinstance(value, bool):
        return "a boolean (%s)" % ("true" if value else "false")
    if isinstance(value, (int, float)):
        return "a number (%s)" % value
    if isinstance(value, str):
        return "a string (%s)" % json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "a list of %d item%s" % (len(value), "" if len(value) == 1 else "s")
    if isinstance(value, dict):
        return "a mapping"
    if value is None:
        return "empty (null)"
    return "a value of an unexpected kind"


def _with_article(words):
    return ("an " if words[:1].lower() in "aeiou" else "a ") + words


# ------------------------------------------------------------------------------------------------
# Rule functions: each takes (rule, ctx) and returns a list of problems.
# ------------------------------------------------------------------------------------------------
def check_inventory(rule, ctx):
    """Connection-free inventory checks: ansible_host and llm_server_model (only when inventory facts are given)."""
    inv = ctx.inventory
    if inv is None:
        return []
    out = []
    host = inv.get("hostname") or "this host"
    where = inv.get("inventory_dir") or "inventories/production"
    if "host_address" in inv and inv.get("host_address") is not None:
        address = inv["host_address"]
        text = str(address)
        markers = [m for m in (inv.get("placeholder_markers") or []) if m and str(m) in text]
        if not text.strip():
            out.append(problem(rule, ERROR, "ansible_host (%s)" % host, address,
                               "is empty: Ansible would try to connect to an empty address",
                               "set ansible_host for %s to the server's address or DNS name in %s/hosts.yml, or "
                               "remove the line to connect to '%s' itself" % (host, where, host)))
        elif markers:
            out.append(problem(rule, ERROR, "ansible_host (%s)" % host, address,
                               "is still the placeholder (%s): the inventory was not filled in" % ", ".join(markers),
                               "set ansible_host for %s to the server's address in %s/hosts.yml (or its "
                               "host_vars file), then run again" % (host, where)))
        elif re.search(r"\s", text) or control_characters(text):
            out.append(problem(rule, ERROR, "ansible_host (%s)" % host, address,
                               "holds whitespace or a control character",
                               "set ansible_host for %s to a bare address or DNS name in %s/hosts.yml" % (host, where)))
    known = sorted(ctx.profiles) if isinstance(ctx.profiles, dict) else []
    if ctx.name is None or (isinstance(ctx.name, str) and not ctx.name.strip()):
        out.append(problem(rule, ERROR, "llm_server_model (%s)" % host, ctx.name, "is not set: the host serves no profile",
                           "set llm_server_model in %s/host_vars/%s.yml to one of %s" % (where, host, known or
                                                                                         "the names in llm_server_models")))
    elif not isinstance(ctx.name, str):
        out.append(problem(rule, ERROR, "llm_server_model (%s)" % host, ctx.name,
                           "must be the name of a profile (a string), but it is %s" % _describe(ctx.name),
                           "set llm_server_model in %s/host_vars/%s.yml to one of %s" % (where, host, known)))
    return out


def check_profile_exists(rule, ctx):
    if ctx.name is None or not isinstance(ctx.name, str) or not ctx.name.strip():
        return [] if ctx.inventory is not None else [
            problem(rule, ERROR, "llm_server_model", ctx.name, "is not set",
                    "set llm_server_model in host_vars/<host>.yml to one of %s" % (
                        sorted(ctx.profiles) if isinstance(ctx.profiles, dict) else "the names in llm_server_models"))]
    if ctx.profiles is None:
        return [problem(rule, ERROR, "llm_server_models", None, "is not defined: there are no model profiles",
                        "define llm_server_models in group_vars/llm_servers/models.yml, %s" % PROFILE_EXAMPLE)]
    if isinstance(ctx.profiles, list):
        named = [p.get("name") for p in ctx.profiles if isinstance(p, dict) and p.get("name")]
        fix = "write it as a mapping from profile name to settings, not as '- ' list items: %s" % PROFILE_EXAMPLE
        if named:
            fix += "; here: move each item's name up as its key (%s)" % ", ".join("%s:" % n for n in named[:3])
        return [problem(rule, ERROR, "llm_server_models", "%s" % _describe(ctx.profiles),
                        "must be a mapping from profile name to profile, but it is %s" % _describe(ctx.profiles), fix)]
    if not isinstance(ctx.profiles, dict):
        return [problem(rule, ERROR, "llm_server_models", ctx.profiles,
                        "must be a mapping from profile name to profile, but it is %s" % _describe(ctx.profiles),
                        "define it in group_vars/llm_servers/models.yml, %s" % PROFILE_EXAMPLE)]
    if not ctx.profiles:
        return [problem(rule, ERROR, "llm_server_models", {}, "defines no profile",
                        "add the profile in group_vars/llm_servers/models.yml, %s" % PROFILE_EXAMPLE)]
    if ctx.name not in ctx.profiles:
        close = difflib.get_close_matches(ctx.name, [str(k) for k in ctx.profiles], n=1)
        return [problem(rule, ERROR, "llm_server_model", ctx.name, "names no profile in llm_server_models",
                        ("did you mean '%s'? " % close[0] if close else "")
                        + "use one of %s, or add the profile to group_vars/llm_servers/models.yml" % sorted(ctx.profiles))]
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", ctx.name):
        return [problem(rule, ERROR, "llm_server_model", ctx.name,
                        "profile names become unit names (sglang-<name>.service)",
                        "rename the profile using letters, digits, '.', '_' and '-' only (starting with a letter "
                        "or digit), e.g. '%s'" % (re.sub(r"[^A-Za-z0-9._-]+", "-", ctx.name).strip("-._") or "my-model"))]
    if not isinstance(ctx.profile, dict):
        return [problem(rule, ERROR, ctx.var(), ctx.profile,
                        "a profile must be a mapping of settings, but it is %s" % _describe(ctx.profile),
                        "write the settings under the name, at least model_path, served_model_name and tp_size: "
                        "%s: {model_path: /models/%s, served_model_name: %s, tp_size: 1}" % (ctx.name, ctx.name, ctx.name))]
    return []


def _type_name(types):
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join({"str": "string", "int": "integer", "float": "number", "bool": "boolean (true/false)",
                        "list": "list", "dict": "mapping"}[t.__name__] for t in types)


def _check_schema(rule, ctx, node, schema, path):
    out = []
    for key, value in node.items():
        if key not in schema:
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            out.append(problem(rule, ERROR, ctx.var(*path, key), value, "unknown profile key",
                               ("rename it to %s" % close[0] if close else "remove it")
                               + " (known keys: %s; roles/sglang_service/README.md)" % ", ".join(sorted(schema))))
            continue
        types = schema[key][0]
        types_t = types if isinstance(types, tuple) else (types,)
        bad_bool = isinstance(value, bool) and bool not in types_t
        if value is not None and (bad_bool or not isinstance(value, types_t)):
            unquote = " without quotes" if isinstance(value, str) and types_t != (str,) else ""
            out.append(problem(rule, ERROR, ctx.var(*path, key), value,
                               "must be %s, but it is %s" % (_with_article(_type_name(types)), _describe(value)),
                               "set %s to %s (%s)%s" % (key, _with_article(_type_name(types)), schema[key][2], unquote)))
        elif isinstance(value, dict) and key in NESTED:
            out += _check_schema(rule, ctx, value, NESTED[key], path + (key,))
    for key, (_types, required, desc) in schema.items():
        if required and node.get(key) in (None, ""):
            out.append(problem(rule, ERROR, ctx.var(*path, key), node.get(key), "is required",
                               "set %s (%s)" % (key, desc)))
    return out


def check_schema(rule, ctx):
    return _check_schema(rule, ctx, ctx.profile, PROFILE_SCHEMA, ())


def _walk_strings(value, path):
    """(path, text, is_name) for every string in VALUE, mapping keys included (is_name True)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield path + (key,), str(key), True
            yield from _walk_strings(item, path + (key,))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _walk_strings(item, path + (index,))
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield path, str(value), False


def _path_var(base, path):
    out = base
    for key in path:
        out += "[%d]" % key if isinstance(key, int) else "['%s']" % key
    return out


def check_control_characters(rule, ctx):
    """ONE place for every string that reaches the unit, the environment file or the argv."""
    out = []
    fix_line = ("write it on one line without control characters (a YAML '|' or '>' block adds a trailing line "
                "break: use a plain or quoted scalar, or '>-')")

    def report(variable, text, is_name, where):
        """VARIABLE: the value's variable; for a mapping key (IS_NAME), the mapping's, marked '(key)'."""
        bad = control_characters(text)
        if bad:
            out.append(problem(rule, ERROR, variable + (" (key)" if is_name else ""), text,
                               "holds %s: %s" % (", ".join(bad), where), fix_line))

    for key, value in (ctx.profile or {}).items():
        if key in NOT_RENDERED:
            continue
        report(ctx.var(), str(key), True, "profile keys never hold one")
        for path, text, is_name in _walk_strings(value, (key,)):
            report(ctx.var(*(path[:-1] if is_name else path)), text, is_name, "it would split the systemd unit's "
                   "ExecStart= (or an environment line) and the server could not start")
    for name, value in sorted(ctx.unit_settings.items()):
        for path, text, is_name in _walk_strings(value, ()):
            report(_path_var(name, path[:-1] if is_name else path), text, is_name, "it is written into the systemd unit")
    for base, env in (("cuda_toolkit_env", ctx.base_env), ("sglang_service_extra_env", ctx.extra_env)):
        for path, text, is_name in _walk_strings(env, ()):
            report(_path_var(base, path[:-1] if is_name else path), text, is_name,
                   "it is written into the environment file")
    secrets = dict(ctx.secrets)
    for name, value in ctx.secret_env.items():
        report("sglang_service_secret_env", str(name), True, "it is written into the environment file")
        secrets["sglang_service_secret_env['%s']" % name] = value
    for name, value in sorted(secrets.items()):
        bad = control_characters(value if isinstance(value, str) else "")
        if bad:
            out.append(problem(rule, ERROR, name, "(secret, not shown)",
                               "holds %s (often a trailing line break from a vault file written with echo)"
                               % ", ".join(b.split(" at ")[0] for b in bad),
                               "store the secret without the line break, e.g. `printf %%s VALUE | ansible-vault "
                               "encrypt_string --stdin-name vault_%s`" % name))
    return out


def _non_finite(value):
    return isinstance(value, float) and not math.isfinite(value)


def check_finite_numbers(rule, ctx):
    out = []

    def walk(value, path):
        if _non_finite(value):
            out.append(problem(rule, ERROR, ctx.var(*path), str(value),
                               "is not a finite number (YAML .nan / .inf): SGLang would start with it and fail later",
                               "set a real number, or remove %s to use the default" % path[-1]))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, path + (key,))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, path + (index,))

    walk(ctx.profile or {}, ())
    for occurrence in ctx.occurrences:
        flag = occurrence["flag"]
        if flag is None or flag.value_type not in ("int", "float"):
            continue
        for word in occurrence["values"]:
            try:
                number = float(word)
            except ValueError:
                continue
            if not math.isfinite(number):
                out.append(problem(rule, ERROR, ctx.origin_var(occurrence["value_index"]), word,
                                   "%s %s is not a finite number (argparse's float() accepts it)"
                                   % (occurrence["option"], word), "give %s a real number" % occurrence["option"]))
    return out


def _number(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def check_ranges(rule, ctx):
    """Value ranges on the effective command line (a value from extra_args counts like a profile key)."""
    out = []
    for flag, minimum, fix in POSITIVE_FLAGS:
        for occurrence in ctx.occurrences_of(flag):
            for word in occurrence["values"]:
                number = _number(word)
                if number is not None and number < minimum:
                    out.append(problem(rule, ERROR, ctx.origin_var(occurrence["value_index"]), word,
                                       "%s must be at least %d" % (flag, minimum), fix))
    for occurrence in ctx.occurrences:
        flag = occurrence["flag"]
        if flag is None or flag.value_type != "int":
            continue
        for word in occurrence["values"]:
            try:
                number = int(str(word).strip())
            except ValueError:
                continue
            if abs(number) > INT64_MAX:
                out.append(problem(rule, ERROR, ctx.origin_var(occurrence["value_index"]), word,
                                   "%s %s overflows: argparse's int() accepts it, but SGLang hands it to torch and "
                                   "CUDA as a 64-bit integer (at most %d) and fails with 'OverflowError: Python int "
                                   "too large to convert to C long'" % (occurrence["option"], word, INT64_MAX),
                                   "give %s a value of at most %d%s" % (
                                       occurrence["option"], INT64_MAX,
                                       " (the model's own: remove context_length)"
                                       if occurrence["option"] == "--context-length" else "")))
    for occurrence in ctx.occurrences_of("--mem-fraction-static"):
        number = _number((occurrence["values"] or [None])[0])
        if number is not None and not 0 < number < 1:
            out.append(problem(rule, ERROR, ctx.origin_var(occurrence["value_index"]), occurrence["values"][0],
                               "--mem-fraction-static must be between 0 and 1 (exclusive)",
                               "use e.g. 0.88 (fraction of GPU memory for weights + KV cache)"))
    for occurrence in ctx.occurrences_of("--port"):
        number = _number((occurrence["values"] or [None])[0])
        if number is not None and not (number.is_integer() and 1 <= number <= 65535):
            out.append(problem(rule, ERROR, ctx.origin_var(occurrence["value_index"]), occurrence["values"][0],
                               "is not a TCP port", "use a port in 1..65535 (SGLang's default is 30000)"))
    for flag, low, text, fix in (("--hicache-ratio", 1, "must exceed 1: the host pool must be larger than the device pool",
                                  "use a ratio > 1 (SGLang's default is 2.0)"),
                                 ("--hicache-size", 0, "must be > 0 GB", "set a size in GB per TP rank")):
        for occurrence in ctx.occurrences_of(flag):
            number = _number((occurrence["values"] or [None])[0])
            if number is not None and number <= low:
                out.append(problem(rule, ERROR, ctx.origin_var(occurrence["value_index"]), occurrence["values"][0],
                                   text, fix))
    shards = ctx.get("expected_shards")
    if isinstance(shards, int) and not isinstance(shards, bool) and shards < 1:
        out.append(problem(rule, ERROR, ctx.var("expected_shards"), shards, "must be a positive integer",
                           "remove it or set it to the number of *.safetensors files of the model"))
    for base, names in (("sglang_service_extra_env", ctx.extra_env), ("sglang_service_secret_env", ctx.secret_env)):
        for key in names:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)):
                out.append(problem(rule, ERROR, "%s['%s']" % (base, key), str(key),
                                   "is not a valid environment variable name",
                                   "use names matching [A-Za-z_][A-Za-z0-9_]*"))
    env = ctx.get("env")
    for key, value in env.items() if isinstance(env, dict) else []:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)):
            out.append(problem(rule, ERROR, ctx.var("env", key), value, "is not a valid environment variable name",
                               "use NAME: value with NAME matching [A-Za-z_][A-Za-z0-9_]*"))
        elif isinstance(value, (dict, list)):
            out.append(problem(rule, ERROR, ctx.var("env", key), value,
                               "must be a string, but it is %s" % _describe(value), "quote the value: %s: \"1\"" % key))
    extra = ctx.get("extra_args")
    for index, arg in enumerate(extra) if isinstance(extra, list) else []:
        if not isinstance(arg, (str, int, float)) or isinstance(arg, bool):
            out.append(problem(rule, ERROR, ctx.var("extra_args", index), arg,
                               "must be one argv word (a string), but it is %s" % _describe(arg),
                               "give each argv word as its own quoted list item, e.g. ['--chunked-prefill-size', '8192']"))
        elif isinstance(arg, str) and re.match(r"^--\S+\s+\S", arg):
            out.append(problem(rule, ERROR, ctx.var("extra_args", index), arg,
                               "holds a flag and its value in one word: SGLang would read it as one unknown flag",
                               "split it into two list items: %s" % json.dumps(arg.split(None, 1))))
    return out


def _path_problems(rule, ctx, variable, path, what):
    out = []
    text = str(path)
    if not text.startswith("/"):
        out.append(problem(rule, ERROR, variable, path,
                           "%s must be an absolute path (the server runs in WorkingDirectory, not where you think)" % what,
                           "use the directory's absolute path on the host, e.g. /models/%s" % os.path.basename(text.rstrip("/"))))
    elif ".." in text.split("/"):
        out.append(problem(rule, ERROR, variable, path, "%s has a '..' segment: which directory it names depends on "
                           "symlinks on the host" % what, "write the resolved path, e.g. %s" % os.path.normpath(text)))
    elif text.rstrip("/") == "":
        out.append(problem(rule, ERROR, variable, path, "%s is the root directory" % what,
                           "use the model's own directory"))
    return out


def check_paths(rule, ctx):
    out = []
    for flag, what in (("--model-path", "the model path"), ("--speculative-draft-model-path", "the draft model path")):
        for occurrence in ctx.occurrences_of(flag):
            for word in occurrence["values"][:1]:
                out += _path_problems(rule, ctx, ctx.origin_var(occurrence["value_index"]), word, what)
    if not ctx.occurrences:  # no command line (schema errors): judge the profile keys
        for keys, what in ((("model_path",), "the model path"), (("speculative", "draft_model_path"), "the draft model path")):
            value = ctx.get(*keys)
            if isinstance(value, str) and value:
                out += _path_problems(rule, ctx, ctx.var(*keys), value, what)
    return out


# Operator settings that land in the unit as paths (ExecStart=, ExecStartPre=, ReadWritePaths=, LoadCredential=,
# EnvironmentFile=, WorkingDirectory=, Documentation=): systemd expands '%' specifiers and '$' variables in them
# and splits them at whitespace, and the unit writes most of them unquoted, so they are refused rather than escaped.
UNIT_PATH_SETTINGS = ("sglang_service_python", "sglang_build_python", "sglang_service_working_dir",
                      "sglang_service_env_file", "sglang_service_env_dir", "sglang_service_state_dir",
                      "sglang_service_unit_dir", "sglang_service_restart_marker", "sglang_service_launcher",
                      "sglang_service_credential_dir", "sglang_service_nvidia_modprobe",
                      "sglang_service_read_write_paths")
# Relative names (StateDirectory=, CacheDirectory=) and names (User=, Group=, After=, ...): the same characters.
UNIT_NAME_SETTINGS = ("sglang_service_state_directory", "sglang_service_cache_directory", "sglang_service_user",
                      "sglang_service_group", "sglang_service_supplementary_groups", "sglang_service_after",
                      "sglang_service_wants")
# Settings that may be empty (then not written into the unit).
UNIT_OPTIONAL_SETTINGS = ("sglang_service_restart_marker", "sglang_service_nvidia_modprobe", "sglang_build_python")
UNIT_UNSAFE_RE = re.compile(r"""[%$\\"'\s]""")

UNIT_UNSAFE_NAMES = (("%", "'%' (a systemd specifier, e.g. %h)"), ("$", "'$' (a variable systemd expands, e.g. $HOME)"),
                     ("\\", "a backslash"), ('"', "a double quote"), ("'", "a single quote"))


def _unit_word_problem(text):
    """Why TEXT cannot be written into the unit as one literal word ('' when it can)."""
    bad = [name for char, name in UNIT_UNSAFE_NAMES if char in text]
    if any(char.isspace() for char in text):
        bad.append("whitespace")
    return "holds " + ", ".join(bad) if bad else ""


def check_unit_settings(rule, ctx):
    """Paths and names the operator sets that are written into the systemd unit: literal, absolute, no '..'."""
    out = []
    for name, value in sorted(ctx.unit_settings.items()):
        if name not in UNIT_PATH_SETTINGS and name not in UNIT_NAME_SETTINGS:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for index, item in enumerate(values):
            variable = "%s[%d]" % (name, index) if isinstance(value, (list, tuple)) else name
            text = "" if item is None else str(item)
            if not text:
                if name not in UNIT_OPTIONAL_SETTINGS and not isinstance(value, (list, tuple)):
                    out.append(problem(rule, ERROR, variable, text, "is empty: the unit needs it",
                                       "set it, or leave it out to get the role's default"))
                continue
            word = text[1:] if name == "sglang_service_read_write_paths" and text.startswith("-") else text
            reason = _unit_word_problem(word)
            if name in UNIT_PATH_SETTINGS:
                parts = word.split("/")
                if not word.startswith("/"):
                    reason = reason or "is not an absolute path"
                elif "." in parts or ".." in parts or "//" in word:
                    reason = reason or "has a '.' or '..' segment or '//': which file it names depends on the host"
                fix = ("write the absolute path without '%%', '$', quotes, backslashes, whitespace, '.' or '..' "
                       "segments (systemd would expand or split it in the unit), e.g. %s"
                       % os.path.normpath("/" + UNIT_UNSAFE_RE.sub("", word).lstrip("/")))
            else:
                if name in ("sglang_service_state_directory", "sglang_service_cache_directory"):
                    if word.startswith("/") or ".." in word.split("/"):
                        reason = reason or "must be a name under /var/lib or /var/cache (relative, no '..')"
                fix = "use a plain name without '%', '$', quotes, backslashes or whitespace"
            if reason:
                out.append(problem(rule, ERROR, variable, text, reason + ": it is written into the systemd unit, "
                                   "which would expand or split it (nothing was changed)", fix))
    return out


def check_secret_length(rule, ctx):
    """gpufleet-launch redacts secrets from the server's output only from this length on (MIN_SECRET there)."""
    out = []
    secrets = dict(ctx.secrets)
    for name, value in (ctx.secret_env or {}).items():
        secrets["sglang_service_secret_env['%s']" % name] = value
    for name, value in sorted(secrets.items()):
        text = "" if value is None else str(value)
        if 0 < len(text) < MIN_SECRET_LENGTH:
            out.append(problem(rule, ERROR, name, "(secret, not shown)",
                               "is shorter than %d characters: gpufleet-launch could not tell it from ordinary log "
                               "text, so it would not be redacted from the server's journal (and refuses to start)"
                               % MIN_SECRET_LENGTH,
                               "use a longer secret (e.g. `openssl rand -hex 24`)"))
    return out


def _secret_flag(ctx, occurrence):
    if occurrence["option"] in SECRET_FLAGS:
        return True
    flag = occurrence["flag"]
    return flag is not None and bool(SECRET_DEST_RE.search(flag.dest or ""))


def check_secrets(rule, ctx):
    """Secrets belong in the vault variables, which reach the server only as root-only systemd credentials."""
    out = []
    for occurrence in ctx.occurrences:
        if ctx.origin(occurrence["index"]) == ("llm_server_api_key",) or not _secret_flag(ctx, occurrence):
            continue  # (the placeholder the collection renders for llm_server_api_key is no secret)
        fix = ("remove %s from extra_args and set llm_server_api_key in the vault (group_vars/llm_servers/vault.yml): "
               "the server then gets it from a root-only systemd credential, added to its arguments inside the process"
               % occurrence["option"]) if occurrence["option"] == "--api-key" else (
            "remove %s from extra_args; a secret in the argv is written into the 0644 unit file and the deployment "
            "record" % occurrence["option"])
        out.append(problem(rule, ERROR, ctx.origin_var(occurrence["index"]), occurrence["option"],
                           "puts a secret on the command line: extra_args are written in clear into the world-readable "
                           "(0644) unit file and into the deployment record copied to the controller", fix))
    env = ctx.get("env")
    for name in env if isinstance(env, dict) else {}:
        if SECRET_ENV_RE.search(str(name)):
            out.append(problem(rule, ERROR, ctx.var("env", name), "(secret, not shown)",
                               "looks like a secret: the profile's env is copied into the deployment record (fetched "
                               "to the controller) and shown in the play's output",
                               _secret_env_fix(name)))
    for name in ctx.extra_env:
        if SECRET_ENV_RE.search(str(name)):
            out.append(problem(rule, ERROR, "sglang_service_extra_env['%s']" % name, "(secret, not shown)",
                               "looks like a secret: sglang_service_extra_env is copied into the deployment record",
                               _secret_env_fix(name)))
    for path, text, _is_name in _walk_strings(ctx.profile or {}, ()):
        if HF_TOKEN_VALUE_RE.search(text) and not (path and path[0] == "env" and SECRET_ENV_RE.search(str(path[-1]))):
            out.append(problem(rule, ERROR, ctx.var(*path),
                               "(looks like a Hugging Face token, not shown)",
                               "holds what looks like a Hugging Face access token (hf_...) in plain inventory",
                               "remove it and set llm_server_hf_token in the vault (group_vars/llm_servers/vault.yml)"))
    return out


def _secret_env_fix(name):
    if str(name).upper() in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN"):
        return ("remove it and set llm_server_hf_token in the vault (group_vars/llm_servers/vault.yml); it is written "
                "only to a root-only systemd credential and set as HF_TOKEN inside the server process")
    return ("remove it from the profile and put it in sglang_service_secret_env (vaulted, e.g. "
            "sglang_service_secret_env: {%s: \"{{ vault_%s }}\"}): written only to a root-only systemd credential, "
            "named but not shown in the record" % (name, str(name).lower()))


def check_flag_source(rule, ctx):
    if ctx.flags_error:
        return [problem(rule, ERROR, "sglang_dir", ctx.flags_error[0], ctx.flags_error[1],
                        "point sglang_dir at the installed `sglang` package directory, or leave it empty before install")]
    return []


def _close(word, choices):
    return difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)


def check_flag_drift(rule, ctx):
    """Every flag and value of the effective command line is defined by the release that will run."""
    out = []
    argv = ctx.rendered["argv"]
    for index, word in enumerate(argv):
        option = str(word).split("=", 1)[0]
        if option in FLAG_DRIFT and (ctx.table is None or ctx.table.get(option) is None):
            out.append(problem(rule, ERROR, ctx.origin_var(index), word,
                               "%s does not exist: the flag is spelled %s in SGLang" % (option, FLAG_DRIFT[option]),
                               "replace %s with %s" % (option, FLAG_DRIFT[option])))
    if ctx.table is None:
        return out
    seen = {p["value"] for p in out}
    for item in ctx.argv_problems:
        if item["flag"] in seen:
            continue
        if item["reason"] == "invalid choice" and item["flag"] in ("--tool-call-parser", "--reasoning-parser"):
            continue  # the parsers rule reports these with the parser lists
        variable = ctx.origin_var(item["index"])
        if item["reason"] == "not defined by this SGLang release":
            elsewhere = releases_with(item["flag"])
            successor = successor_of(item["flag"], ctx.table)
            if successor:
                hint = "use `%s` (%s): replace %s in %s%s" % (
                    successor["successor"] + ("=" + successor["value"] if successor["value"] else ""),
                    successor["text"], item["flag"], variable,
                    ", or build a release that has it (%s)" % _release_span(elsewhere) if elsewhere else "")
            elif elsewhere:
                hint = "remove %s, or build a release that has %s (%s)" % (
                    variable, item["flag"], _release_span(elsewhere))
            elif item["suggestions"]:
                hint = "did you mean %s? Replace it in %s" % (" / ".join(item["suggestions"]), variable)
            else:
                hint = "remove it from %s (see `python -m sglang.launch_server --help` of this release)" % variable
            out.append(problem(rule, ERROR, variable, item["flag"],
                               "%s does not define %s: SGLang exits with 'unrecognized arguments'"
                               % (ctx.release, item["flag"]) + _approximation_note(ctx), hint))
        elif item["reason"] == "invalid choice":
            close = _close(item["value"], item["suggestions"])
            out.append(problem(rule, ERROR, variable, item["value"],
                               "%s: '%s' is not a choice of %s (argparse exits with 'invalid choice')"
                               % (item["flag"], item["value"], ctx.release) + _approximation_note(ctx),
                               ("did you mean '%s'? " % close[0] if close else "") + "use one of %s" % item["suggestions"]))
        elif item["reason"] == "is a switch and takes no value":
            out.append(problem(rule, ERROR, variable, "%s=%s" % (item["flag"], item["value"]),
                               "%s is a switch and takes no value (argparse exits with 'ignored explicit argument')"
                               % item["flag"], "write %s alone: present means on, absent means off" % item["flag"]))
        elif item.get("after_switch"):
            out.append(problem(rule, ERROR, variable, item["flag"],
                               "follows the switch %s, which takes no value: SGLang would exit with 'unrecognized "
                               "arguments: %s'" % (item["after_switch"], item["flag"]),
                               "remove '%s' from extra_args: %s alone turns it on (leave the switch out to turn "
                               "it off)" % (item["flag"], item["after_switch"])))
        elif item["reason"] == "stray positional argument":
            out.append(problem(rule, ERROR, variable, item["flag"],
                               "is not a flag and follows no flag that takes a value",
                               "put each flag before its value in extra_args, e.g. ['--chunked-prefill-size', '8192']"))
        elif item["reason"] == "expects a value":
            out.append(problem(rule, ERROR, variable, item["flag"], "%s expects a value" % item["flag"],
                               "give the value as the next list item of extra_args: ['%s', 'VALUE']" % item["flag"]))
        else:
            out.append(problem(rule, ERROR, variable, item["value"], "%s %s" % (item["flag"], item["reason"]),
                               "give %s %s" % (item["flag"], item["reason"].replace("expects ", ""))))
    return out


def _release_span(releases):
    """['0.5.8', '0.5.8.post1', ..., '0.5.23'] -> 'SGLang 0.5.8-0.5.23' (first and last of the table)."""
    return "SGLang %s" % releases[0] if len(releases) == 1 else "SGLang %s-%s" % (releases[0], releases[-1])


def _approximation_note(ctx):
    if ctx.release_match == EXACT:
        return ""
    return (" (sglang_build_ref '%s' is not a release: checked against the newest release in the collection's "
            "table; if the flag is new in that ref, pin sglang_build_ref to a release tag, or set "
            "preflight_flag_release to a release or 'none')" % ctx.release_ref)


def check_duplicate_flags(rule, ctx):
    """argparse keeps the last value of a flag given twice: extra_args would silently override a checked key."""
    out = []
    by_key = {}
    for occurrence in ctx.occurrences:
        if occurrence["flag"] is not None and occurrence["flag"].repeatable:
            continue
        by_key.setdefault(occurrence["key"], []).append(occurrence)
    for found in by_key.values():
        if len(found) < 2:
            continue
        where = ["%s (%s%s)" % (ctx.origin_var(o["index"]), o["option"],
                                " " + " ".join(o["values"]) if o["values"] else "") for o in found]
        first, later = found[0], found[1:]
        from_key = [o for o in found if ctx.origin(o["index"])[0] != "extra_args"]
        if from_key:
            fix = "remove it from extra_args and keep %s" % ctx.origin_var(from_key[0]["index"])
        else:
            fix = "keep one of them"
        out.append(problem(rule, ERROR, ctx.origin_var(later[-1]["index"]), first["option"],
                           "is given %d times: %s; argparse keeps the last, so the checked value would be "
                           "overridden" % (len(found), " and ".join(where)), fix))
    return out


def _check_tp_multinode(rule, ctx, tp, nnodes, variable):
    """nnodes > 1: tp_size spreads over all nodes, tp_size / nnodes ranks (GPUs) on each.

    The node facts (ctx.node: rank, rendezvous address, GPUs of every node) come from the preflight
    role's multinode.yml, which also refuses a host without a node group; without them only this
    host's GPUs are compared with tp_size / nnodes.
    """
    if tp % nnodes:
        return [problem(rule, ERROR, variable, tp, "is not a multiple of nnodes=%d (each node runs "
                        "tp_size / nnodes ranks)" % nnodes, "set tp_size to a multiple of %d" % nnodes)]
    per_node = tp // nnodes
    counts = ctx.node.get("gpu_counts") or []
    known = [int(c) for c in counts if c]
    if counts and len(known) == len(counts) and sum(known) < tp:
        return [problem(rule, ERROR, variable, tp, "exceeds the %d GPUs of all %d nodes (%s)"
                        % (sum(known), nnodes, ", ".join(str(c) for c in known)),
                        "lower tp_size to at most %d, or add nodes" % (min(known) * nnodes))]
    count = ctx.gpu_count or (int(ctx.expected_gpu_count) if ctx.expected_gpu_count else 0)
    if count and per_node > count:
        return [problem(rule, ERROR, variable, tp, "needs %d GPUs per node (tp_size / nnodes) but "
                        "this node has %d" % (per_node, count),
                        "lower tp_size to %d, or raise nnodes" % (count * nnodes))]
    return []


def check_tp_vs_gpus(rule, ctx):
    value, variable = ctx.setting("--tp-size")
    tp = int(_number(value)) if _number(value) is not None and _number(value).is_integer() else None
    if tp is None:
        return []
    nnodes = ctx.get("nnodes")
    if isinstance(nnodes, int) and nnodes > 1:
        return _check_tp_multinode(rule, ctx, tp, nnodes, variable)
    count, where = ctx.gpu_count, "GPUs reported by gpu_info"
    if not count:  # no facts, or no GPU visible yet (driver not installed): trust the inventory
        count, where = ctx.expected_gpu_count, "GPUs of llm_server_expected_gpu_count"
        if not count:  # 0/unset: a host without GPUs by design (test containers); nothing to compare
            return []
        count = int(count)
    if tp > count:
        return [problem(rule, ERROR, variable, tp, "exceeds the %d %s" % (count, where),
                        "lower tp_size to at most %d, or serve this model on a host with more GPUs" % count)]
    return []


def check_parsers(rule, ctx):
    out = []
    for key, flag in (("tool_call_parser", "--tool-call-parser"), ("reasoning_parser", "--reasoning-parser")):
        value, variable = ctx.setting(flag)
        if not value or value is True:
            continue
        choices = ctx.table.choices_of(flag) if ctx.table is not None else None
        if choices is not None and value not in choices:
            close = _close(value, choices)
            hint = "did you mean '%s'? " % close[0] if close else ""
            if key == "tool_call_parser" and value in (ctx.table.choices_of("--reasoning-parser") or []):
                hint = "'%s' is a reasoning parser (set it as reasoning_parser); for tool calls " % value + (
                    "Qwen3.5 / Qwen3-Coder emit <tool_call><function=...> XML: use qwen3_coder; otherwise "
                    if value.startswith("qwen3") else "")
            out.append(problem(rule, ERROR, variable, value,
                               "is not a %s of %s (argparse exits with 'invalid choice')"
                               % (key.replace("_", " "), ctx.release) + _approximation_note(ctx),
                               hint + "use one of %s" % sorted(choices)))
    value, variable = ctx.setting("--tool-call-parser")
    if value == "qwen3" and ctx.table is None:
        out.append(problem(rule, ERROR, variable, "qwen3",
                           "'qwen3' is a reasoning parser, not a tool-call parser in any SGLang release",
                           "Qwen3.5 / Qwen3-Coder emit <tool_call><function=...> XML: use qwen3_coder"))
    return out


def check_deprecated(rule, ctx):
    out = []
    env = ctx.get("env") or {}
    if ctx.vt is not None and ctx.vt >= (0, 5, 14, 0) and isinstance(env, dict) and "SGLANG_ENABLE_SPEC_V2" in env:
        out.append(problem(rule, WARNING, ctx.var("env", "SGLANG_ENABLE_SPEC_V2"), env["SGLANG_ENABLE_SPEC_V2"],
                           "SGLANG_ENABLE_SPEC_V2 was removed in SGLang 0.5.14 and has no effect",
                           "remove it from env (spec v2 is chosen by SGLang itself from 0.5.14)"))
    # How the unit will spell a setting is news only for the release that runs (sglang_service says it again).
    for key, value, text in ctx.rendered["rewrites"] if ctx.release_match == EXACT else []:
        out.append(problem(rule, WARNING, ctx.var(*key.split(".")), value, text,
                           "nothing to do: the collection renders the spelling %s expects" % ctx.release))
    # A deprecated flag whose own release names its successor (the release table's SUCCESSORS, or the tree's help).
    for occurrence in ctx.occurrences:
        flag = occurrence["flag"]
        if flag is None or not flag.deprecated or not flag.successor or ctx.origin(occurrence["index"])[0] != "extra_args":
            continue
        fix = "use `%s` instead of %s in %s" % (flag.successor, occurrence["option"], ctx.origin_var(occurrence["index"]))
        if occurrence["option"] == "--enable-flashinfer-allreduce-fusion":
            fix = "set allreduce.flashinfer_fusion: true instead of the raw flag (the collection renders `%s`)" % (
                flag.successor)
        out.append(problem(rule, WARNING, ctx.origin_var(occurrence["index"]), occurrence["option"],
                           "is deprecated in %s, which names `%s` as its successor" % (ctx.release, flag.successor),
                           fix))
    return out


def _gdn_facts(ctx):
    """(allowed backends, where from) for hybrid GDN models on this host's Blackwell GPUs."""
    facts = None
    if ctx.release_match == EXACT:
        if ctx.table is not None and ctx.table.gdn_blackwell:
            facts = ctx.table.gdn_blackwell
        elif ctx.version in RELEASES:
            facts = release_table(ctx.version).gdn_blackwell
    if facts:
        allowed, where = set(facts["sm120" if ctx.is_sm120 else "sm100"]), "SGLang %s" % ctx.version
    else:
        # Release unknown (or a branch): the backends every tabulated release accepts.
        allowed = gdn_backends_every_release(ctx.is_sm120)
        where = "every SGLang release %s-%s (the release that will run is not known exactly)" % (RELEASES[0], RELEASES[-1])
    if ctx.is_sm120:
        allowed = {b for b in allowed if not b.startswith(SM120_UNSUPPORTED_PREFIX)}
    return allowed, where


def check_gdn_attention(rule, ctx):
    if not (ctx.is_hybrid_gdn and ctx.is_blackwell):
        return []
    allowed, where = _gdn_facts(ctx)
    base, base_var = ctx.setting("--attention-backend")
    out, reported = [], set()
    for flag, label in (("--prefill-attention-backend", "prefill attention backend"),
                        ("--decode-attention-backend", "decode attention backend")):
        value, variable = ctx.setting(flag) if ctx.key_of(flag) is not None else (None, None)
        if value is None:  # SGLang: prefill/decode backend default to --attention-backend
            value, variable, label = base, base_var, "attention backend"
        if value in allowed or (variable, value) in reported:
            continue
        reported.add((variable, value))
        out.append(problem(rule, ERROR, variable, value,
                           "hybrid GDN model (%s) on Blackwell SM%s: the %s must be one of %s "
                           "(%s); others crash start-up with 'AssertionError: ... supported backends on Blackwell "
                           "GPUs for hybrid GDN models'" % (
                               ", ".join(ctx.architectures),
                               "/".join("%d%d" % c for c in sorted(ctx.capabilities)), label, sorted(allowed), where),
                           "set attention_backend: triton (the working SM120 recipe)%s" % (
                               " and remove %s" % variable if "extra_args" in str(variable) else "")))
    return out


def check_fp4_gemm(rule, ctx):
    if not (ctx.is_nvfp4 and ctx.is_sm120) or ctx.key_of("--fp4-gemm-backend") is None:
        return []  # (a release without --fp4-gemm-backend: flag-drift refuses the flag itself)
    backend, variable = ctx.setting("--fp4-gemm-backend")
    if backend in FP4_GEMM_BAD_ON_SM120:
        return [problem(rule, ERROR, variable, backend,
                        "NVFP4 on SM120: %s %s" % (backend, FP4_GEMM_BAD_ON_SM120[backend]),
                        "set fp4_gemm_backend: flashinfer_cudnn with moe_runner_backend: flashinfer_cutlass%s" % (
                            " and remove it from extra_args" if "extra_args" in variable else ""))]
    if backend in (None, "", "auto"):
        return [problem(rule, WARNING, variable, backend,
                        "NVFP4 on SM120 with the automatic FP4 GEMM choice: 'auto' picks different backends per "
                        "release, and flashinfer_cutlass gives NaN on SM120",
                        "pin fp4_gemm_backend: flashinfer_cudnn")]
    return []


def _quant_capabilities(ctx):
    if ctx.table is not None and ctx.table.quant_min_capability and ctx.release_match == EXACT:
        return ctx.table.quant_min_capability, "SGLang %s" % ctx.version
    if ctx.version in RELEASES and ctx.release_match == EXACT:
        return release_table(ctx.version).quant_min_capability or {}, "SGLang %s" % ctx.version
    # Not known exactly: the lowest minimum any tabulated release has (never a false refusal).
    lowest = {}
    for release in RELEASES:
        for method, cap in (release_table(release).quant_min_capability or {}).items():
            lowest[method] = min(cap, lowest.get(method, cap))
    return lowest, "every SGLang release %s-%s (lowest minimum)" % (RELEASES[0], RELEASES[-1])


def check_quantization_capability(rule, ctx):
    method, variable = ctx.quantization()
    if not method or not ctx.capabilities:
        return []
    table, where = _quant_capabilities(ctx)
    need = table.get(method)
    if need is None:
        return []
    have = min(major * 10 + minor for major, minor in ctx.capabilities)
    if have >= need:
        return []
    return [problem(rule, ERROR, variable, method,
                    "needs compute capability %d.%d or newer (%s, get_min_capability() of its config class), but "
                    "the %s have %d.%d: SGLang refuses with 'The quantization method %s is not supported for the "
                    "current GPU'" % (need // 10, need % 10, where, ctx.capability_source, have // 10, have % 10, method),
                    "serve a checkpoint quantized for these GPUs (e.g. FP8 or BF16 instead of NVFP4), or this profile "
                    "on a host with capability %d.%d+" % (need // 10, need % 10))]


def _truthy_env(value):
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def check_speculative(rule, ctx):
    algorithm, algorithm_var = ctx.setting("--speculative-algorithm")
    if not algorithm or algorithm is True:
        return []
    out = []
    topk_value, topk_var = ctx.setting("--speculative-eagle-topk")
    topk = _number(topk_value)
    env = ctx.get("env") if isinstance(ctx.get("env"), dict) else {}
    spec_v2 = bool(ctx.get("speculative", "spec_v2")) or _truthy_env(env.get("SGLANG_ENABLE_SPEC_V2", ""))
    if spec_v2 and topk is not None and topk > 1:
        out.append(problem(rule, ERROR, topk_var, topk_value,
                           "spec v2 (overlap scheduling) raises 'Spec v2 currently only supports topk = 1'",
                           "set speculative.eagle_topk: 1 (chain speculation), or spec_v2: false"
                           + (" and remove --speculative-eagle-topk from extra_args" if "extra_args" in topk_var else "")))
    elif ctx.vt is not None and (0, 5, 11, -1) <= ctx.vt < (0, 5, 14, 0) and topk is not None and topk > 1 \
            and str(env.get("SGLANG_ENABLE_SPEC_V2", "")).lower() not in ("0", "false"):
        out.append(problem(rule, ERROR, topk_var, topk_value,
                           "SGLang %s enables spec v2 by default, which supports only topk = 1" % ctx.version,
                           "set speculative.eagle_topk: 1, or env SGLANG_ENABLE_SPEC_V2: 'False'"))
    draft, _draft_var = ctx.setting("--speculative-draft-model-path")
    if str(algorithm).upper() in ("EAGLE", "EAGLE3", "STANDALONE") and not draft:
        out.append(problem(rule, ERROR, ctx.var("speculative", "draft_model_path"), None,
                           "%s needs a draft model (%s)" % (algorithm, algorithm_var),
                           "set speculative.draft_model_path to the draft model's absolute directory"))
    return out


def check_hicache(rule, ctx):
    enabled, enabled_var = ctx.setting("--enable-hierarchical-cache")
    if not enabled:
        return []
    out = []
    radix, radix_var = ctx.setting("--disable-radix-cache")
    if radix:
        out.append(problem(rule, ERROR, radix_var, True,
                           "HiCache extends the radix cache; SGLang refuses it with --disable-radix-cache",
                           "remove disable_radix_cache / --disable-radix-cache, or disable hicache"))
    tp_value, _tp_var = ctx.setting("--tp-size")
    tp = int(_number(tp_value)) if _number(tp_value) else 1
    hicache = ctx.get("hicache") if isinstance(ctx.get("hicache"), dict) else {}
    size, _size_var = ctx.setting("--hicache-size")
    ratio_value, _ratio_var = ctx.setting("--hicache-ratio")
    per_rank, how = None, ""
    if _number(size) is not None:
        per_rank, how = _number(size), "--hicache-size %s" % size
    elif isinstance(hicache.get("kv_pool_gb_per_rank"), _NUM) and not _non_finite(hicache.get("kv_pool_gb_per_rank")):
        ratio = _number(ratio_value) or 2.0
        per_rank = ratio * float(hicache["kv_pool_gb_per_rank"])
        how = "ratio %g x kv_pool_gb_per_rank %g" % (ratio, float(hicache["kv_pool_gb_per_rank"]))
    ram_mb = ctx.facts.get("memtotal_mb")
    variable = ctx.var("hicache") if ctx.get("hicache") else enabled_var
    if per_rank is None:
        out.append(problem(rule, WARNING, variable, hicache or enabled,
                           "cannot size the HiCache host pool (ratio of an unknown device pool)",
                           "set hicache.kv_pool_gb_per_rank (from the 'KV Cache is allocated' log line) or hicache.size_gb"))
    elif ram_mb:
        need = tp * per_rank + HICACHE_RESERVE_GB
        have = float(ram_mb) / 1024.0
        if need > have:
            out.append(problem(rule, ERROR, variable, hicache or enabled,
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
    host, variable = ctx.setting("--host")
    host = host or "127.0.0.1"
    key, _key_var = ctx.setting("--api-key")
    if _is_loopback(str(host)) or ctx.api_key_set or key or ctx.get("allow_unauthenticated"):
        return []
    return [problem(rule, ERROR, variable, host,
                    "listens beyond loopback without an API key: anyone on the network can use the model",
                    "set llm_server_api_key (vault), or host: 127.0.0.1 behind a proxy, or allow_unauthenticated: true")]


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


def model_context_length(config):
    """The context length SGLang derives from a config.json (hf_transformers_utils.get_context_length), or None."""
    return model_context_source(config)[0]


def model_context_source(config):
    """(context length, where it comes from: e.g. 'text_config.max_position_embeddings') or (None, None)."""
    text, prefix = config, ""
    for key in TEXT_CONFIG_KEYS:
        sub = config.get(key)
        if isinstance(sub, dict):
            if key == "thinker_config" and isinstance(sub.get("text_config"), dict):
                text, prefix = sub["text_config"], "thinker_config.text_config."
            else:
                text, prefix = sub, key + "."
            break
    rope = text.get("rope_scaling") or config.get("rope_scaling") or {}
    factor = 1
    if isinstance(rope, dict) and rope:
        factor = rope.get("factor", 1) or 1
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        value = text.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            where = prefix + key + (" x rope_scaling.factor %g" % float(factor) if float(factor) != 1 else "")
            return int(float(factor) * value), where
    return None, None


def check_context_length(rule, ctx):
    value, variable = ctx.setting("--context-length")
    wanted = _number(value)
    if wanted is None or not ctx.model_config:
        return []
    derived, where = model_context_source(ctx.model_config)
    if derived is None or wanted <= derived:
        return []
    env = ctx.get("env") if isinstance(ctx.get("env"), dict) else {}
    allowed = _truthy_env(env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", ""))
    return [problem(rule, WARNING if allowed else ERROR, variable, value,
                    "exceeds the model's maximum context length %d (%s in %s/config.json): SGLang %s" % (
                        derived, where, ctx.get("model_path") or "model_path",
                        "warns and may produce incorrect output or CUDA errors (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN "
                        "is set)" if allowed else "refuses to start ('User-specified context_length ... is greater "
                        "than the derived context_length')"),
                    "lower context_length to %d or less, or remove it to use the model's own" % derived)]


def check_disk_space(rule, ctx):
    disk = ctx.disk
    want_gb = ctx.get("expected_size_gb")
    if not disk or not ctx.get("hub_repo") or not isinstance(want_gb, _NUM) or _non_finite(want_gb):
        return []
    want = float(want_gb) * 1e9
    if disk["state"] == "complete":  # every recorded file as recorded: model_download fetches nothing
        return []
    margin = float(disk.get("margin_gb") or 0) * 1e9
    need = max(0.0, want - disk["have_bytes"]) + margin
    if disk["free_bytes"] >= need:
        return []
    return [problem(rule, ERROR, ctx.var("model_path"), ctx.get("model_path"),
                    "the download of %s needs about %.1f GB more (expected_size_gb %s, %.1f GB present) plus a %.0f GB "
                    "margin, but %s has only %.1f GB free: the run would fail after the driver, CUDA and SGLang "
                    "builds" % (ctx.get("hub_repo"), max(0.0, want - disk["have_bytes"]) / 1e9, want_gb,
                                disk["have_bytes"] / 1e9, margin / 1e9, disk["where"], disk["free_bytes"] / 1e9),
                    "free %.1f GB there, or set model_path to a larger filesystem (the margin is "
                    "model_download_space_margin_gb)" % ((need - disk["free_bytes"]) / 1e9))]


# The rule table: order = report order. "stop": nothing after it can be judged when it fails.
RULES = (
    {"id": "inventory", "fn": check_inventory,
     "checks": "ansible_host is not empty or a placeholder; llm_server_model is set",
     "source": "collection contract (inventories/production/hosts.yml ships REPLACE_WITH_SERVER_ADDRESS)"},
    {"id": "profile-exists", "fn": check_profile_exists, "stop": True,
     "checks": "llm_server_models is a mapping; llm_server_model names a profile; the name is unit-safe",
     "source": "collection contract (unit name sglang-<profile>.service)"},
    {"id": "schema", "fn": check_schema, "checks": "known keys, required keys, types",
     "source": "profile schema, roles/sglang_service/README.md"},
    {"id": "control-characters", "fn": check_control_characters,
     "checks": "no control character (\\n, \\r, NUL, ...) in any string that reaches the unit, the env file or the argv",
     "source": "systemd.service(5) command lines / systemd-analyze verify ('Unbalanced quoting'); issue 15 corpus"},
    {"id": "finite-numbers", "fn": check_finite_numbers, "checks": "no NaN / infinity in the profile or numeric flags",
     "source": "YAML .nan/.inf parse as floats; SGLang's argparse type=float accepts 'nan' (server_args.py)"},
    {"id": "ranges", "fn": check_ranges,
     "checks": "value ranges on the effective argv (tp >= 1, 0 < mem fraction < 1, port, HiCache, env names)",
     "source": "SGLang argument semantics (server_args.py)"},
    {"id": "paths", "fn": check_paths, "checks": "model and draft model paths are absolute, without '..'",
     "source": "the unit runs in WorkingDirectory; issue 15 corpus (relative draft_model_path, '..' segments)"},
    {"id": "secrets", "fn": check_secrets,
     "checks": "no secret flag (--api-key, ...) in extra_args, no token-like env names, no hf_ tokens in plain inventory",
     "source": "the unit is 0644 and the deployment record is fetched to the controller (sglang_service)"},
    {"id": "unit-settings", "fn": check_unit_settings,
     "checks": "paths and names written into the unit: absolute, literal (no %, $, quotes, backslash, whitespace), "
               "no '.'/'..'",
     "source": "systemd.unit(5) specifiers, systemd.service(5) command lines (variables, quoting); issue 34"},
    {"id": "secret-length", "fn": check_secret_length,
     "checks": "API key, HF token and secret environment values are empty or >= 8 characters",
     "source": "gpufleet-launch redacts secrets of 8+ characters in every encoding (issue 34)"},
    {"id": "flag-source", "fn": check_flag_source, "checks": "the installed SGLang's flag definitions are readable",
     "source": "sglang/srt/server_args.py (<= 0.5.13), sglang/srt/arg_groups (>= 0.5.12)"},
    {"id": "flag-drift", "fn": check_flag_drift, "needs_argv": True,
     "checks": "every flag and value of the effective argv is defined by the release that will run",
     "source": "seed (--fp4-gemm-runner-backend does not exist); argparse 'invalid choice' exits 2; "
               "plugins/module_utils/sglang_release_table.py (PyPI releases 0.5.4-0.5.23)"},
    {"id": "duplicate-flag", "fn": check_duplicate_flags, "needs_argv": True,
     "checks": "no flag given twice (profile key and extra_args, or twice in extra_args)",
     "source": "argparse keeps the last value (Python argparse 'store' action)"},
    {"id": "tp-vs-gpus", "fn": check_tp_vs_gpus, "checks": "tp_size <= GPUs on the host",
     "source": "SGLang needs one GPU per tensor-parallel rank"},
    {"id": "parsers", "fn": check_parsers, "checks": "tool-call and reasoning parsers exist in the release",
     "source": "seed (kimi_k2 parser missing: raw <|tool_calls_section_begin|>; 'qwen3' used as tool parser); "
               "sglang function_call/parser_names.py, parser/reasoning_parser.py"},
    {"id": "deprecated", "fn": check_deprecated, "needs_argv": True,
     "checks": "deprecated flags/env rewritten or warned per release",
     "source": "sglang 0.5.14: --enable-flashinfer-allreduce-fusion deprecated, SGLANG_ENABLE_SPEC_V2 removed"},
    {"id": "gdn-attention", "fn": check_gdn_attention,
     "checks": "hybrid GDN model on Blackwell: attention, prefill and decode backends the release accepts",
     "source": "seed (flashinfer crashed Qwen3.5 start-up); sglang layers/attention/attention_registry.py "
               "(0.5.4: triton; 0.5.16+: prefill/decode checked, SM120 set of its own)"},
    {"id": "fp4-gemm-sm120", "fn": check_fp4_gemm,
     "checks": "NVFP4 on SM120 avoids FP4 GEMM backends giving NaN (flashinfer_cutlass, cutlass, flashinfer_trtllm)",
     "source": "seed ('NaN happened' with the default FP4 GEMM); flashinfer#2708; sglang 0.5.10.post1 adds 'cutlass'"},
    {"id": "quantization-capability", "fn": check_quantization_capability,
     "checks": "the quantization method's minimum compute capability <= the GPUs'",
     "source": "sglang model_loader/loader.py (get_min_capability); layers/quantization/*.py per release"},
    {"id": "speculative", "fn": check_speculative, "checks": "spec v2 needs topk 1; EAGLE needs a draft model",
     "source": "seed (spec v2 + topk 4: 'Spec v2 currently only supports topk = 1'); sglang speculative worker"},
    {"id": "hicache", "fn": check_hicache, "checks": "HiCache host pool fits RAM; not with radix cache disabled",
     "source": "seed (HiCache sizing); sglang mem_cache hicache host pool check, server_args radix check"},
    {"id": "listen-auth", "fn": check_listen_auth, "checks": "non-loopback listen address needs an API key",
     "source": "sglang --api-key protects all but /health*, /metrics; default host 127.0.0.1"},
    {"id": "sm120-allreduce", "fn": check_sm120_allreduce,
     "checks": "FlashInfer fusion is a no-op on SM120 before 0.5.14",
     "source": "sglang 0.5.10.post1 server_args (fusion only on SM90/SM100, nnodes == 1)"},
    {"id": "context-length", "fn": check_context_length,
     "checks": "context_length <= the model's (config.json, when on the host)",
     "source": "sglang configs/model_config.py (derived_context_len; SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN)"},
    {"id": "disk-space", "fn": check_disk_space,
     "checks": "free space for the model download before anything changes (model_download's manifest and margin)",
     "source": "model_download's own space check (roles/model_download/tasks/download.yml), moved before the builds"},
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


def read_disk(model_path, margin_gb, hub_repo="", hub_revision="main", record_dir=model_manifest.RECORD_DIR):
    """Free bytes of the filesystem model_path is (or will be) on, and what is there already, judged as
    model_download judges it (module_utils/model_manifest.check: the state against the model's record in
    RECORD_DIR and the bytes present), so preflight's estimate is model_download's own."""
    where = model_path
    while where and not os.path.isdir(where):
        parent = os.path.dirname(where.rstrip("/")) or "/"
        if parent == where:
            break
        where = parent
    try:
        stat = os.statvfs(where or "/")
    except OSError:
        return None
    found = model_manifest.check(model_path, hub_repo or "", hub_revision or "main", record_dir=record_dir)
    return {"free_bytes": stat.f_bavail * stat.f_frsize, "have_bytes": found["bytes_present"],
            "state": found["state"], "where": where, "margin_gb": margin_gb}


def load_table(sglang_dir):
    """(table, version, error): error is (value, reason) when SGLANG_DIR is set but unreadable."""
    if not sglang_dir:
        return None, None, None
    try:
        table = load_flag_table(sglang_dir)
    except FlagSourceError as exc:
        return None, None, (sglang_dir, str(exc))
    return table, table.version, None


def validate(ctx, only=None):
    """Run every rule (or the rule ids in ONLY); return {'errors', 'warnings', 'argv', 'env', 'origins'}."""
    problems = []
    empty = {"argv": [], "origins": [], "env": {}, "rewrites": []}
    if isinstance(ctx.profile, dict):
        try:
            ctx.rendered = render(ctx.profile, ctx.table, ctx.version, ctx.api_key_set, node=ctx.node, check=False)
        except (AttributeError, TypeError, ValueError):
            ctx.rendered = None  # a wrongly shaped profile: the schema rule names what to fix
        if ctx.rendered is not None:
            ctx.occurrences, ctx.argv_problems = parse_argv(ctx.table, ctx.rendered["argv"])
    for rule in RULES:
        if only is not None and rule["id"] not in only:
            continue
        if rule["id"] not in ("inventory", "profile-exists") and not isinstance(ctx.profile, dict):
            break
        if ctx.rendered is None and rule.get("needs_argv"):
            continue
        found = rule["fn"](rule, ctx)
        problems += found
        if rule.get("stop") and found:
            break
    problems = _without_echoes(problems)
    errors = [p for p in problems if p["severity"] == ERROR]
    warnings = [p for p in problems if p["severity"] == WARNING]
    rendered = ctx.rendered or empty
    if not errors and ctx.rendered is not None:
        try:  # defence in depth: the renderer refuses what the rules above should have caught
            check_rendered(rendered)
        except RenderError as exc:
            [rule] = [r for r in RULES if r["id"] == "control-characters"]
            errors.append(problem(rule, ERROR, ctx.var(), None, "the renderer refused the command line: %s" % exc,
                                  "remove the control character from the profile value named above"))
    return {"errors": errors, "warnings": warnings, "argv": rendered["argv"], "env": rendered["env"],
            "origins": rendered["origins"]}


# Rules that find the input itself malformed: a variable they name is not judged again by later rules
# (a string tp_size is a schema error, not also "--tp-size expects an integer").
SHAPE_RULES = ("schema", "control-characters", "finite-numbers")


def _without_echoes(problems):
    shaped = {p["variable"] for p in problems if p["rule"] in SHAPE_RULES}
    out, seen = [], set()
    for p in problems:
        key = (p["rule"], p["variable"])
        if key in seen or (p["rule"] not in SHAPE_RULES and p["variable"] in shaped):
            continue
        seen.add(key)
        out.append(p)
    return out


def format_problem(p):
    value = p["value"]
    if value is None:
        shown = "(unset)"
    elif isinstance(value, str) and value.startswith("(") and value.endswith(")") and "not shown" in value:
        shown = value
    else:
        shown = json.dumps(value, default=str)
    return "[%s] %s = %s: %s. Fix: %s. (source: %s)" % (p["rule"], p["variable"], shown, p["reason"], p["fix"], p["source"])
