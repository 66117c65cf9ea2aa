# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_build role's decisions on a no-op path, from what sglang_build_state read (issue 20).

Pure: no I/O. Each rule is the one the role's tasks applied before this module existed, with the same
messages, so a run decides exactly as the stat/slurp/git/assert chain it replaces:
- `resolve_ref`: what ansible.builtin.git (check mode, bare) returned as `after` for a ref, read from one
  `git ls-remote` answer (branch first, then tag, peeled to its commit; anything else is taken as a hash);
- `is_new`: a commit must be built unless its full 40-digit id has a build.json;
- `verify_reasons`: verify.yml's "Decide whether to verify", less the dependency step's part (known later);
- `state_file_reasons`: whether activate.yml's copy of the state file would change it when nothing is built;
- `refusals`: prepare.yml's, checkout.yml's and activate.yml's asserts, all before any change.
"""

from __future__ import annotations

import json
import re

FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# checkout.yml's assert on the git task's `after`: a ref that named nothing came back verbatim.
COMMIT_LIKE = re.compile(r"^[0-9a-f]{7,40}$")

__all__ = ["FULL_COMMIT", "COMMIT_LIKE", "ls_remote_patterns", "resolve_ref", "is_new", "verify_reasons",
           "to_nice_json", "state_file_reasons", "interpreter_refusal", "ref_refusal", "current_refusal",
           "state_file_refusal", "git_refusal"]


def ls_remote_patterns(ref):
    """The patterns of the one `git ls-remote` that answers what the git module asked in up to three calls."""
    if ref == "HEAD":
        return ["HEAD"]
    return ["refs/heads/%s" % ref, "refs/tags/%s" % ref, "refs/tags/%s^{}" % ref]


def resolve_ref(ref, ls_remote_output):
    """The commit the git module's check mode reports for `ref`, given ls-remote's answer to ls_remote_patterns.

    A branch wins over a tag (the module asks for branches first); an annotated tag resolves to the commit it
    points at (its `^{}` line). A ref that names neither comes back as it is, as the module returns it: the
    caller refuses it unless it looks like a commit hash.
    """
    found = {}
    for line in (ls_remote_output or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            found.setdefault(parts[1], parts[0])
    if ref == "HEAD":
        return found.get("HEAD", ref)
    for name in ("refs/heads/%s" % ref, "refs/tags/%s^{}" % ref, "refs/tags/%s" % ref):
        if name in found:
            return found[name]
    return ref


def is_new(commit, marker_exists):
    """checkout.yml: a commit is built again unless it is a full id whose build.json exists."""
    return not (bool(FULL_COMMIT.match(commit or "")) and bool(marker_exists))


def verify_reasons(new, previous, python, modules):
    """Why the build must be verified again, before the dependency step ran (its `changed` and `environment`
    are compared by the role after it): a new build, another interpreter, other modules to import.

    previous: the parsed build.json of the commit ({} when there is none); its `verified` is what was checked.
    A missing key compares as Jinja's `default('')`/`default([])` did (a null value is not missing).
    """
    seen = previous.get("verified") if isinstance(previous, dict) else None
    seen = seen if isinstance(seen, dict) else {}
    reasons = []
    if new:
        reasons.append("new build")
    if seen.get("python", "") != python:
        reasons.append("verified with %s, now %s" % (seen.get("python") or "nothing", python))
    if seen.get("modules", []) != list(modules):
        reasons.append("verified imports %s, now %s" % (seen.get("modules", []), list(modules)))
    return reasons


def verified_environment(previous):
    """The `environment` the last verification saw ('' when none: the role's `default('')`)."""
    seen = previous.get("verified") if isinstance(previous, dict) else None
    return seen.get("environment", "") if isinstance(seen, dict) else ""


def to_nice_json(data):
    """Ansible's to_nice_json filter (indent 4, sorted keys, ', ' / ': ' separators, ASCII escapes)."""
    return json.dumps(data, indent=4, sort_keys=True, separators=(",", ": "))


def state_file_reasons(state, commit, state_file):
    """Why activate.yml's copy of the state file would change it on a run that builds and verifies nothing.

    state: the parsed state file ({} when absent); state_file: host_state.file_state() of it. That run adds
    the commit to `builds` when it is not there (so the file changes), and otherwise writes the content it
    read back through to_nice_json with mode 0644: any other formatting or mode is a change.
    """
    builds = state.get("builds") if isinstance(state.get("builds"), dict) else {}
    if commit not in builds:
        return ["%s is not in the state file's builds" % (commit or "the commit")]
    if not state_file.get("exists"):
        return ["absent"]
    if state_file.get("kind") != "file":
        return ["a %s, wanted a file" % state_file.get("kind")]
    reasons = []
    if state_file.get("content") != (to_nice_json(state) + "\n").encode("utf-8"):
        reasons.append("content differs from what the role writes")
    if state_file.get("mode") != "0644":
        reasons.append("mode %s, wanted 0644" % state_file.get("mode"))
    return reasons


# -- refusals: the words of the asserts they replace ------------------------------------------------
def interpreter_refusal(python, host):
    return ("sglang_build_python=%s does not exist on %s and sglang_build_venv_create is false. Point "
            "sglang_build_python at the interpreter of your torch environment, or set sglang_build_venv_create: "
            "true to let the role create a venv there." % (python, host))


def ref_refusal(ref, git_url):
    return ("sglang_build_ref=%s is not a branch or tag of %s (and not a commit hash). Set sglang_build_ref to an "
            "existing branch, tag or commit." % (ref, git_url))


def current_refusal(current):
    return ("%s exists and is not a symbolic link: the role serves builds through a link there. Move it away (it "
            "is not one of this role's builds) or set sglang_build_dir to another directory." % current)


def state_file_refusal(path, error):
    return ("sglang_build_state_file=%s is not the role's JSON record (%s). Move it away (the role writes a new "
            "one from the builds' build.json) or point sglang_build_state_file at another path." % (path, error))


def git_refusal(ref):
    return ("git is not installed on this host, and sglang_build_ref=%s must be resolved with it. Install git, or "
            "set sglang_build_install_os_packages: true with git in sglang_build_os_packages." % ref)
