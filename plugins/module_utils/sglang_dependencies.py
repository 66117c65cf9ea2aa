# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's declared dependencies in a Python environment, with the installed torch held fixed.

The order that keeps a tuned CUDA/torch stack: (1) torch and its family (torchvision, torchaudio)
are installed only when missing (or when asked to replace them), from their own index (the wheels
of the host's CUDA); (2) the requirements SGLang's pyproject.toml declares at the built commit are
checked against what is installed, and what is missing or out of range ("drift") is resolved by pip
with every installed family member pinned by a constraints file and requested at exactly its
version, so pip cannot swap torch or the CUDA libraries it pins; (3) SGLang itself is installed
elsewhere with --no-deps.

What runs in the target environment (listing distributions, evaluating requirement specifiers and
markers) is PROBE, run by that environment's interpreter: the module itself runs on the system
Python, which has neither the environment's packages nor `packaging`. Standard library only here.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.gpufleet.llm_server.plugins.module_utils.restart_marker import maybe_mark

__all__ = ["DependencyError", "PROBE", "canonical", "conflict_summary", "declared_requirements", "plan",
           "read_report", "requirement_name", "run", "torch_version_requirement"]

# Runs with the environment's own interpreter: `python -c PROBE '{"requirements": [...], "packages": [...]}'`.
# Prints one JSON object. `packaging` when the environment has it, else the copy vendored in pip.
PROBE = r'''
import hashlib, importlib.metadata as md, json, re, sys


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()

try:
    from packaging.requirements import Requirement
    source = "packaging"
except ImportError:
    try:
        from pip._vendor.packaging.requirements import Requirement
        source = "pip._vendor.packaging"
    except ImportError:
        Requirement, source = None, None

args = json.loads(sys.argv[1])
installed, where = {}, {}
for dist in md.distributions():
    name = dist.metadata.get("Name")
    if not name or canon(name) in installed:
        continue  # the first on sys.path wins, as for imports
    installed[canon(name)] = dist.version
    try:
        where[canon(name)] = str(dist.locate_file(""))
    except Exception:
        pass

requirements = []
for text in args["requirements"]:
    entry = {"requirement": text, "name": None, "specifier": "", "applies": True, "installed": None,
             "satisfied": False, "error": None}
    requirements.append(entry)
    if Requirement is None:
        entry["error"] = "neither packaging nor pip is importable in this environment"
        continue
    try:
        req = Requirement(text)
    except Exception as exc:
        entry["error"] = "not a valid requirement: %s" % exc
        continue
    entry["name"], entry["specifier"] = canon(req.name), str(req.specifier)
    if req.marker is not None:
        try:
            entry["applies"] = bool(req.marker.evaluate({"extra": ""}))
        except Exception as exc:
            entry["error"] = "cannot evaluate the marker: %s" % exc
            continue
    version = installed.get(entry["name"])
    entry["installed"] = version
    if version is not None:
        try:
            entry["satisfied"] = req.specifier.contains(version, prereleases=True)
        except Exception as exc:
            entry["error"] = "installed version %s cannot be compared: %s" % (version, exc)

held = {}
for name in args["packages"]:
    key = canon(name)
    if key not in installed:
        continue
    info = {"version": installed[key], "location": where.get(key), "cuda": None}
    try:
        path = md.distribution(name).locate_file(name.replace("-", "_") + "/version.py")
        text = open(str(path), encoding="utf-8").read()
        found = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        info["cuda"] = found.group(1) if found else None
    except Exception:
        pass
    held[key] = info

excluded = set(canon(n) for n in args.get("exclude", []))
digest = hashlib.sha256("\n".join("%s==%s" % kv for kv in sorted(installed.items())
                                  if kv[0] not in excluded).encode()).hexdigest()
print(json.dumps({"python": sys.version.split()[0], "executable": sys.executable, "packaging": source,
                  "pip": installed.get("pip"), "installed": installed, "requirements": requirements,
                  "held": held, "environment": digest}))
'''

_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


class DependencyError(Exception):
    """A problem the module reports with fail_json: the message says what, where, and the fix.

    CHANGED: whether pip had already changed the environment when it happened.
    """

    def __init__(self, message, changed=False):
        super().__init__(message)
        self.changed = changed


def canonical(name):
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(text):
    """The canonical project name a PEP 508 requirement string starts with (None when it has none)."""
    found = _NAME.match(text or "")
    return canonical(found.group(1)) if found else None


def declared_requirements(pyproject_text, extras=(), where="pyproject.toml"):
    """[project].dependencies plus the requested optional-dependency groups of a pyproject.toml.

    Returns (project name, list of requirement strings). Raises DependencyError for a file without
    a static dependency list or an unknown extra.
    """
    try:
        import tomllib
    except ImportError:  # pragma: no cover - the collection's targets run Python >= 3.11
        raise DependencyError("Reading %s needs Python >= 3.11 (tomllib) for the module; run it with a newer "
                              "ansible_python_interpreter." % where)
    try:
        data = tomllib.loads(pyproject_text)
    except tomllib.TOMLDecodeError as exc:
        raise DependencyError("%s is not valid TOML (%s)." % (where, exc))
    project = data.get("project") or {}
    if "dependencies" in (project.get("dynamic") or []):
        raise DependencyError("%s declares its dependencies as dynamic (computed by the build backend): there is "
                              "no static list to resolve. Install them yourself and set the drift policy to warn." % where)
    declared = list(project.get("dependencies") or [])
    optional = project.get("optional-dependencies") or {}
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise DependencyError("%s has no optional-dependency group(s) %s; it defines %s." % (
            where, ", ".join(unknown), ", ".join(sorted(optional)) or "none"))
    for extra in extras:
        declared += list(optional[extra])
    return project.get("name") or "sglang", declared


def torch_version_requirement(torch_version):
    """The requirement string for a torch_version setting: "2.9.1" -> torch==2.9.1, ">=2.9" -> torch>=2.9."""
    spec = (torch_version or "").strip()
    if not spec:
        return None
    return "torch" + (spec if spec[:1] in "=<>!~" else "==" + spec)


def plan(probe, requirements, families, torch_install):
    """Decide, from a PROBE result over REQUIREMENTS, what the torch and the dependency steps do.

    REQUIREMENTS: [(requirement text, origin)] in probe order; origin "declared" (SGLang's
    pyproject), "extra" (the role's additions) or "torch_version" (the torch override, at most one).
    FAMILIES: canonical names of the torch family (installed from their own index, held when present).
    Returns a dict: held {name: version} (installed family members), family_install [req] (to install
    before the rest), disagreements [{requirement, name, installed}] (kept although SGLang wants
    another version), drift [{requirement, name, installed, why, origin}] (non-family requirements
    not satisfied), resolve [req] (every applicable non-family requirement), errors [str].
    """
    out = {"held": {}, "family_install": [], "disagreements": [], "drift": [], "resolve": [], "errors": []}
    installed = probe["installed"]
    for name in families:
        if name in installed:
            out["held"][name] = installed[name]
    family, override = {}, None
    for entry, (text, origin) in zip(probe["requirements"], requirements):
        if entry["error"] and entry["name"] is None:
            out["errors"].append("%s (%s): %s" % (text, origin, entry["error"]))
            continue
        if origin == "torch_version":
            override = (text, entry)
            continue
        if not entry["applies"]:
            continue
        name = entry["name"]
        if name in families:
            family.setdefault(name, (text, entry))
            continue
        out["resolve"].append(text)
        if not entry["satisfied"]:
            why = entry["error"] or ("not installed" if entry["installed"] is None
                                     else "installed %s does not satisfy %s" % (entry["installed"], entry["specifier"]))
            out["drift"].append({"requirement": text, "name": name, "installed": entry["installed"], "why": why,
                                 "origin": origin})
    if override is not None and "torch" not in family:
        family["torch"] = override
    replacing_torch = False
    for name, (text, entry) in family.items():
        wanted_text, wanted = override if (name == "torch" and override is not None) else (text, entry)
        if name not in installed:
            if torch_install == "never":
                out["errors"].append("%s is not installed and the torch family is never installed here "
                                     "(torch_install: never); the environment needs %s" % (name, wanted_text))
            else:
                out["family_install"].append(wanted_text)
            continue
        if torch_install == "replace" and not wanted["satisfied"]:
            out["family_install"].append(wanted_text)
            replacing_torch = replacing_torch or name == "torch"
            continue
        for req_text, req in ((text, entry),) + (((wanted_text, wanted),) if wanted is not entry else ()):
            if not req["satisfied"]:
                out["disagreements"].append({"requirement": req_text, "name": name, "installed": installed[name]})
    if replacing_torch:
        # torchvision/torchaudio pin the torch they were built for: re-resolve them with the new one.
        for name, (text, _entry) in family.items():
            if name != "torch" and text not in out["family_install"]:
                out["family_install"].append(text)
    return out


def conflict_summary(stderr):
    """The lines of pip's error output that explain a failed resolution (conflict, missing version)."""
    lines = [line.rstrip() for line in (stderr or "").splitlines()]
    out = []
    if "The conflict is caused by:" in "\n".join(lines):
        start = next(i for i, line in enumerate(lines) if "The conflict is caused by:" in line)
        for line in lines[start:]:
            if line.startswith("To fix this") or line.startswith("ERROR: ResolutionImpossible"):
                break
            if line.strip():
                out.append(line.strip())
    for line in lines:
        if line.startswith("ERROR: Cannot install") or line.startswith("ERROR: Could not find a version") or \
                line.startswith("ERROR: No matching distribution"):
            out.insert(0, line[len("ERROR: "):].strip()) if line.startswith("ERROR: Cannot install") else out.append(
                line[len("ERROR: "):].strip())
    if not out:
        out = [line.strip() for line in lines if line.strip()][-12:]
    return out


def read_report(text):
    """[(canonical name, version)] that a `pip install --dry-run --report` JSON would install."""
    report = json.loads(text)
    return [(canonical(item["metadata"]["name"]), item["metadata"]["version"]) for item in report.get("install", [])]


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text or "")[:3])


def _pins(held):
    return ["%s==%s" % (name, version) for name, version in sorted(held.items())]


class _Runner:
    """pip and the probe through the module, with the constraints file in a private temp dir."""

    def __init__(self, module, python, pip_args, names):
        self.module, self.python, self.pip_args, self.names = module, python, list(pip_args), names
        self.commands = []
        self.tmp = None

    def probe(self, requirements, packages):
        # SGLang itself is left out of the environment digest: which build `current` points at is
        # not a change of the environment its builds run in.
        rc, out, err = self.module.run_command([self.python, "-c", PROBE, json.dumps(
            {"requirements": requirements, "packages": packages, "exclude": ["sglang"]})])
        if rc != 0:
            raise DependencyError("Reading the environment of %s failed (rc=%s): %s. Is %s a working Python "
                                  "interpreter (the venv the role creates, or your torch environment)?" % (
                                      self.python, rc, (err or out).strip()[-600:], self.python))
        return json.loads(out)

    def tempfile(self, name, content):
        if self.tmp is None:
            import tempfile
            self.tmp = tempfile.mkdtemp(prefix="gpufleet-deps-")
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(content)
        return path

    def pip(self, requirements, held, extra_args=(), dry_run=False):
        argv = [self.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        argv += self.pip_args + list(extra_args)
        if held:
            argv += ["-c", self.tempfile("constraints.txt", "\n".join(_pins(held)) + "\n")]
        report = None
        if dry_run:
            report = os.path.join(self.tempfile("report.json", ""))
            argv += ["--dry-run", "--report", report]
        argv += _pins(held) + list(requirements)
        self.commands.append(argv)
        if not dry_run and self.restart_marker:
            # Issue 17: a real install changes the environment the running server imports from; the marker
            # goes first, so a run that dies after the install cannot lose the restart.
            maybe_mark(self.module, self.restart_marker, "sglang_build",
                       "pip install into %s: %s" % (self.python, " ".join(list(requirements))[:500]))
        rc, out, err = self.module.run_command(argv)
        installs = None
        if rc == 0 and dry_run:
            with open(report, encoding="utf-8") as handle:
                installs = read_report(handle.read())
        return rc, out, err, installs

    def cleanup(self):
        if self.tmp:
            import shutil
            shutil.rmtree(self.tmp, ignore_errors=True)


def run(module, params):
    """The sglang_dependencies module's work: returns the result dict, raises DependencyError."""
    p = params

    def names(option):
        """The option as the caller's variables spell it (the role passes hint_prefix=sglang_build_)."""
        return (p.get("hint_prefix") or "") + option

    pyproject = os.path.join(p["project_dir"], "pyproject.toml")
    if not os.path.isfile(pyproject):
        raise DependencyError("%s does not exist: project_dir=%s is not the folder of SGLang's pyproject.toml "
                              "(in a checkout: <checkout>/python)." % (pyproject, p["project_dir"]))
    with open(pyproject, encoding="utf-8") as handle:
        project, declared = declared_requirements(handle.read(), p["extras"], pyproject)
    families = [canonical(n) for n in p["torch_packages"]]
    requirements = [(text, "declared") for text in declared] + [(text, "extra") for text in p["requirements"]]
    override = torch_version_requirement(p["torch_version"])
    if override:
        requirements.append((override, "torch_version"))
    runner = _Runner(module, p["python"], p["pip_args"], names)
    runner.restart_marker = p.get("restart_marker")
    torch_args = ["--index-url", p["torch_index_url"]] if p["torch_index_url"] else []
    try:
        before = runner.probe([t for t, _o in requirements], families)
        decided = plan(before, requirements, families, p["torch_install"])
        if decided["errors"]:
            raise DependencyError("Cannot check the dependencies of %s (%s) in %s: %s. Fix: %s." % (
                project, pyproject, p["python"], "; ".join(decided["errors"]),
                "install the torch family yourself or set %s: if-missing" % names("torch_install")
                if p["torch_install"] == "never" else "correct the requirement strings"))
        result = {
            "changed": False, "project": {"name": project, "pyproject": pyproject},
            "declared": [t for t, _o in requirements], "held": dict(decided["held"]),
            "family_install": decided["family_install"], "disagreements": decided["disagreements"],
            "drift": decided["drift"], "installed": [], "would_install": [], "pip_commands": runner.commands,
            "python": before["python"], "pip_version": before["pip"],
        }
        for item in decided["disagreements"]:
            module.warn(
                "%s declares %s, but %s %s is installed in %s and is kept (%s=%s): the role never replaces it "
                "unless asked (%s: replace, with %s to pick the build). The other requirements are resolved with "
                "it held." % (project, item["requirement"], item["name"], item["installed"], p["python"],
                              names("torch_install"), p["torch_install"], names("torch_install"),
                              names("torch_version")))
        pending = bool(decided["drift"] or decided["family_install"])
        if pending and p["on_drift"] == "fail":
            raise DependencyError("The environment of %s does not satisfy the requirements of %s (%s) and %s is "
                                  "fail: %s. Nothing was installed. Fix: install them yourself, or set %s: install." % (
                                      p["python"], project, pyproject, names("dependency_drift"),
                                      _describe(decided), names("dependency_drift")))
        if pending and p["on_drift"] == "warn":
            module.warn("%s does not satisfy %s's requirements (%s is warn, nothing installed): %s." % (
                p["python"], project, names("dependency_drift"), _describe(decided)))
        elif pending and module.check_mode:
            result["changed"] = True
            if _version_tuple(before["pip"]) < (22, 2):
                result["would_install"] = [{"requirement": r} for r in decided["family_install"]] + [
                    {"requirement": d["requirement"]} for d in decided["drift"]]
            else:
                extra = ["--extra-index-url", p["torch_index_url"]] if (
                    p["torch_index_url"] and decided["family_install"]) else []
                installing = {requirement_name(r) for r in decided["family_install"]}
                keep = {n: v for n, v in decided["held"].items() if n not in installing}
                rc, out, err, installs = runner.pip(decided["family_install"] + decided["resolve"],
                                                    keep, extra, dry_run=True)
                if rc != 0:
                    raise _resolution_error(project, pyproject, keep, (out or '') + '\n' + (err or ''), names,
                                            "would fail (check mode: pip --dry-run)")
                replaced = sorted(set(keep) & {n for n, _v in installs})
                if replaced and p["torch_install"] != "replace":
                    raise DependencyError("pip would replace %s despite the constraints; nothing was changed." % replaced)
                result["would_install"] = [{"name": n, "version": v, "installed": before["installed"].get(n)}
                                           for n, v in installs]
        elif pending:
            if decided["family_install"]:
                keep = {n: v for n, v in decided["held"].items()
                        if n not in {requirement_name(r) for r in decided["family_install"]}}
                rc, out, err, _i = runner.pip(decided["family_install"], keep, torch_args)
                if rc != 0:
                    raise _resolution_error(project, pyproject, keep, (out or '') + '\n' + (err or ''), names,
                                            "failed installing %s" % " ".join(decided["family_install"]))
                after_family = runner.probe([t for t, _o in requirements], families)
                decided = plan(after_family, requirements, families, "if-missing")
                decided["family_installed"] = True
                result["held"] = dict(decided["held"])
                result["disagreements"] = decided["disagreements"]
            if decided["drift"]:
                rc, out, err, _i = runner.pip(decided["resolve"], decided["held"])
                if rc != 0:
                    error = _resolution_error(project, pyproject, decided["held"], (out or '') + '\n' + (err or ''), names, "failed")
                    error.changed = bool(decided.get("family_installed"))
                    raise error
            result["changed"] = True
        after = runner.probe([t for t, _o in requirements], families) if result["changed"] and not module.check_mode \
            else before
        if result["changed"] and not module.check_mode:
            final = plan(after, requirements, families, "if-missing")
            moved = {n: (v, after["installed"].get(n)) for n, v in result["held"].items()
                     if after["installed"].get(n) != v}
            if moved:
                raise DependencyError("pip changed the held packages %s despite the constraints (before -> after: %s)." % (
                    sorted(moved), moved), changed=True)
            if final["drift"] or final["family_install"]:
                raise DependencyError("After pip, %s still does not satisfy: %s." % (p["python"], _describe(final)),
                                      changed=True)
            result["installed"] = [{"name": n, "before": before["installed"].get(n), "after": v}
                                   for n, v in sorted(after["installed"].items()) if before["installed"].get(n) != v]
        torch = after["held"].get("torch") or {}
        result["torch"] = {"version": torch.get("version"), "cuda": torch.get("cuda"),
                           "location": torch.get("location"),
                           "installed_now": any(requirement_name(r) == "torch" for r in decided["family_install"])
                           if not module.check_mode else False}
        if p["cuda_version"] and torch.get("cuda") and \
                _version_tuple(torch["cuda"])[:1] != _version_tuple(p["cuda_version"])[:1]:
            module.warn(
                "torch %s in %s is built for CUDA %s, but the host's CUDA toolkit is %s: point %s at the torch wheels "
                "for CUDA %s (and set %s: replace with %s to switch builds)." % (
                    torch["version"], p["python"], torch["cuda"], p["cuda_version"], names("torch_index_url"),
                    p["cuda_version"], names("torch_install"), names("torch_version")))
        result["environment"] = after["environment"]
        result["msg"] = _summary(result, project, p["python"], module.check_mode)
        return result
    finally:
        runner.cleanup()


def _describe(decided):
    parts = ["%s (%s)" % (d["requirement"], d["why"]) for d in decided["drift"]]
    parts += ["%s (torch family, not installed)" % r for r in decided["family_install"]]
    return "; ".join(parts)


def _resolution_error(project, pyproject, held, stderr, names, what):
    summary = conflict_summary(stderr)
    text = " ".join(summary).lower()
    held_hit = [n for n in held if re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(n), text)]
    if held_hit:
        fix = ("%s's pins need a different %s than the one installed (%s): set %s: replace (with %s to choose the "
               "build) to let the role replace it, or build an SGLang commit whose pins match it" % (
                   project, "/".join(held_hit), ", ".join(_pins({n: held[n] for n in held_hit})),
                   names("torch_install"), names("torch_version")))
    else:
        fix = "check %s (index, mirror, --find-links) and the requirement named above" % names("pip_args")
    return DependencyError("pip %s resolving %s's requirements (%s)%s: %s. Fix: %s." % (
        what, project, pyproject,
        (" with %s held" % ", ".join(_pins(held))) if held else "", " | ".join(summary).rstrip("."), fix))


def _summary(result, project, python, check_mode):
    if result["changed"]:
        if check_mode:
            return "would install %s into %s for %s" % (
                ", ".join("%s %s" % (i.get("name", i.get("requirement")), i.get("version", "")) for i in
                          result["would_install"]).strip() or "the missing requirements", python, project)
        return "installed %s into %s for %s (held: %s)" % (
            ", ".join("%s %s" % (i["name"], i["after"]) for i in result["installed"]) or "nothing new", python,
            project, ", ".join(_pins(result["held"])) or "none")
    if result["drift"]:
        return "%s does not satisfy %d of %s's requirements (not installed: drift policy)" % (
            python, len(result["drift"]), project)
    return "%s satisfies every requirement of %s (held: %s)" % (python, project, ", ".join(_pins(result["held"])) or "none")
