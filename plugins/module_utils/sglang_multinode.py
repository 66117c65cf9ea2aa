# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Multi-node tensor parallel: this host's rank and the rendezvous address, from the inventory alone.

A profile with nnodes > 1 runs one SGLang server on the hosts of the inventory group named by
llm_server_node_group (docs/fleet.md). The facts are the collection-wide multi-node interface, read by
sglang_service, openai_smoke_test, sglang_router and playbooks/swap_model.yml:
  llm_server_nnodes          the profile's nnodes (1 for a single-node profile);
  llm_server_node_rank       the host's index in the group sorted by inventory name (stable whatever
                             the inventory source's order); 0 for a single-node profile;
  llm_server_dist_init_addr  rank 0's llm_server_node_address, else ansible_host, else its name, and the
                             profile's dist_init_port (default 5000);
  llm_server_node_gpu_counts GPUs of each node (gpu_info's gpu_count; None where unknown), for the
                             tp-vs-GPUs preflight rule.
Pure functions (the action plugin gathers the inventory data); the messages are the ones the preflight
role's tasks/multinode.yml asserted with before it moved here.
"""

from __future__ import annotations

LOOPBACK_ADDRESSES = ("127.0.0.1", "localhost", "::1", "0.0.0.0")
DEFAULT_DIST_INIT_PORT = 5000


class MultinodeError(Exception):
    """The inventory does not describe a usable multi-node server; the message says what to fix."""


def as_int(value):
    """Jinja's `int` filter: int(), else int(float()), else 0 (what the role's `| int` gave)."""
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def rendezvous_host(address):
    """The host part of HOST:PORT (an IPv6 address may be bracketed)."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def node_facts(hostname, model, profiles, node_group, groups, hosts):
    """The multi-node facts of HOSTNAME; raises MultinodeError with the fix.

    MODEL and PROFILES: the host's llm_server_model and llm_server_models; NODE_GROUP: its
    llm_server_node_group (None when unset); GROUPS: the inventory's groups (name -> host names);
    HOSTS: for the hosts of NODE_GROUP, name -> {'llm_server_model', 'llm_server_node_address',
    'ansible_host', 'gpu_count'} (None where unset).
    """
    profile = profiles.get(model) if isinstance(profiles, dict) and isinstance(model, str) else None
    if not isinstance(profile, dict):
        raise MultinodeError(
            "%s: llm_server_model=%r names no profile in llm_server_models, so its node count is unknown. Set "
            "llm_server_model to one of %s." % (hostname, model, sorted(profiles) if isinstance(profiles, dict) else []))
    nnodes = 1 if profile.get("nnodes") is None else as_int(profile["nnodes"])
    facts = {"llm_server_nnodes": nnodes}
    if nnodes == 1:
        facts["llm_server_node_rank"] = 0
    if nnodes <= 1:
        return facts
    members = groups.get(node_group) if isinstance(node_group, str) else None
    if (members is None or hostname not in members or len(members) != nnodes
            or any((hosts.get(name) or {}).get("llm_server_model") != model for name in members)):
        raise MultinodeError(
            "%s: profile '%s' has nnodes=%s, so its hosts must be one inventory group named by llm_server_node_group "
            "(now %s) with exactly %s hosts, this host among them, all choosing llm_server_model=%s (group now: %s). "
            "Fix the group or the profile's nnodes."
            % (hostname, model, nnodes, "unset" if node_group is None else node_group, nnodes, model,
               list(groups.get(node_group if node_group is not None else "", []) or [])))
    nodes = sorted(members)
    first = hosts.get(nodes[0]) or {}
    address = first.get("llm_server_node_address")
    if address is None:
        address = first.get("ansible_host")
    if address is None:
        address = nodes[0]
    port = profile.get("dist_init_port")
    dist_init_addr = "%s:%s" % (address, DEFAULT_DIST_INIT_PORT if port is None else port)
    if rendezvous_host(dist_init_addr) in LOOPBACK_ADDRESSES:
        raise MultinodeError(
            "%s: dist_init_addr %s is not reachable from the other nodes. Set llm_server_node_address (or ansible_host) "
            "of %s to its address on the network the nodes share." % (hostname, dist_init_addr, nodes[0]))
    facts.update(
        llm_server_node_rank=nodes.index(hostname),
        llm_server_dist_init_addr=dist_init_addr,
        llm_server_node_gpu_counts=[(hosts.get(name) or {}).get("gpu_count") for name in nodes],
    )
    return facts
