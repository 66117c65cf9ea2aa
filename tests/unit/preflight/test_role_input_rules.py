"""The roles' variable-only rules (plugins/module_utils/role_inputs.py) and the argument specs they sit on.

Pure: values go in as the roles' own defaults (roles/*/defaults/main.yml, with the few templated defaults
given the values they take on a plain host), one bad value at a time; the messages must name the variable,
the value and the fix in the words the roles used before the rules moved here (molecule/nvidia_driver's
bad-input cases and tests/integration/patch/test_role_inputs.py match them in real runs).
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.gpufleet.llm_server.plugins.module_utils import role_inputs as ri

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"

# What the templated defaults come to on an Ubuntu 24.04 host before any role ran (the preflight play).
TEMPLATED = {
    "nvidia_driver": {"nvidia_driver_source": "ubuntu", "nvidia_driver_distribution": "ubuntu2404",
                      "nvidia_driver_expected_gpu_count": "0"},
    "cuda_toolkit": {},
    "sglang_build": {"sglang_build_cuda_version": "", "sglang_build_verify_profile_name": "",
                     "sglang_build_verify_profiles": {},
                     "sglang_build_restart_marker": "/var/lib/gpufleet/sglang/restart-pending"},
    "sglang_sm120_patch": {"sglang_sm120_patch_target_dir": "/opt/sglang/current/src/python/sglang"},
    "sglang_service": {"sglang_service_group": "sglang", "sglang_service_credential_dir": "/etc/sglang/credentials",
                       "sglang_service_restart_marker": "/var/lib/gpufleet/sglang/restart-pending",
                       "inventory_hostname": "gpu1"},
}


def values(role, **changes):
    data = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    data.update(TEMPLATED[role])
    data.update(changes)
    return data


def spec(role, entry="main"):
    return ri.entry_options(yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text()), entry)


@pytest.mark.parametrize("role", sorted(ri.RULES))
def test_the_defaults_pass(role):
    assert ri.RULES[role](values(role)) == []


@pytest.mark.parametrize("role", sorted(ri.RULES))
def test_every_variable_a_rule_reads_is_a_role_option(role):
    """A rule reading a name the role does not declare would judge a value users cannot see in the README."""
    read = set()

    class Recorder(dict):
        def __getitem__(self, key):
            read.add(key)
            return super().__getitem__(key)

        def __contains__(self, key):
            read.add(key)
            return super().__contains__(key)

    ri.RULES[role](Recorder(values(role)))
    read -= set(ri.EXTRA_VARIABLES.get(role, ()))
    assert read <= set(spec(role)), read - set(spec(role))


CASES = [
    ("nvidia_driver", {"nvidia_driver_branch": "59O"}, ["nvidia_driver_branch is '59O'", 'nvidia_driver_branch: "590"']),
    ("nvidia_driver", {"nvidia_driver_branch": 590}, []),
    ("nvidia_driver", {"nvidia_driver_version": "580.95.05"},
     ["nvidia_driver_version is '580.95.05' but nvidia_driver_branch is '595'", '"595.48.01"']),
    ("nvidia_driver", {"nvidia_driver_version": "595.71.05-0ubuntu0.24.04.1"}, []),
    ("nvidia_driver", {"nvidia_driver_kernel_modules": "precompiled", "nvidia_driver_profile": "full"},
     ["nvidia_driver_profile is 'full'", "nvidia_driver_kernel_modules is 'precompiled'", "use nvidia_driver_profile: compute"]),
    ("nvidia_driver", {"nvidia_driver_kernel_modules": "precompiled"}, []),
    ("nvidia_driver", {"nvidia_driver_package_data_overrides": []}, ["must be a mapping", "not list"]),
    ("nvidia_driver", {"nvidia_driver_module_options": {"nvidia": 1}}, ["nvidia_driver_module_options is {'nvidia': 1}"]),
    ("nvidia_driver", {"nvidia_driver_module_options": {"Nvidia": {}}}, ["it must map a module name to its options"]),
    ("nvidia_driver", {"nvidia_driver_expected_gpu_count": -1}, ["nvidia_driver_expected_gpu_count", "is '-1'"]),
    ("nvidia_driver", {"nvidia_driver_reboot": "always"}, ["nvidia_driver_reboot 'always' (if_required|never)"]),
    ("nvidia_driver", {"nvidia_driver_repo_key_min_validity_days": -1},
     ["nvidia_driver_repo_key_min_validity_days is '-1'", "0 refreshes only an expired key"]),
    ("nvidia_driver", {"nvidia_driver_repo_key_min_validity_days": 0}, []),
    ("nvidia_driver", {"nvidia_driver_source": "nvidia_repo"},
     ["nvidia_driver_source is 'nvidia_repo'", "The former value nvidia_repo is now nvidia."]),
    ("nvidia_driver", {"nvidia_driver_source": "distribution"}, ["The former value distribution is now ubuntu"]),
    ("nvidia_driver", {"nvidia_driver_source": "nvidia"}, []),
    ("cuda_toolkit", {"cuda_toolkit_version": "13"}, ["cuda_toolkit_version is '13'", 'cuda_toolkit_version: "13.0"']),
    ("cuda_toolkit", {"cuda_toolkit_version": 13.1}, []),
    ("cuda_toolkit", {"cuda_toolkit_nccl_version": "2.28"}, ["cuda_toolkit_nccl_version is '2.28'", '"2.28.3-1+cuda13.0"']),
    ("cuda_toolkit", {"cuda_toolkit_nccl_version": "2.28.3-1+cuda13.0"}, []),
    ("sglang_build", {"sglang_build_install_mode": "full"},
     ["['sglang_build_install_mode'] no longer exist(s)", "sglang_build_torch_install"]),
    ("sglang_build", {"sglang_build_dir": "opt/sglang"}, ["sglang_build_dir=opt/sglang", "absolute paths"]),
    ("sglang_build", {"sglang_build_dir": "//"}, ["the build directory not /"]),
    ("sglang_build", {"sglang_build_ref": "v0.5 rc"}, ["sglang_build_ref=v0.5 rc", "ref without spaces"]),
    ("sglang_build", {"sglang_build_keep_builds": 0}, ["sglang_build_keep_builds=0 must be at least 1"]),
    ("sglang_build", {"sglang_build_python": "/usr/local/python3"},
     ["sglang_build_python must be VENV/bin/python (got /usr/local/python3)"]),
    ("sglang_build", {"sglang_build_python": "/usr/local/python3", "sglang_build_venv_create": False}, []),
    ("sglang_build", {"sglang_build_extra_pip_packages": ["--pre"]}, ["['--pre']", "sglang_build_pip_args"]),
    ("sglang_build", {"sglang_build_torch_packages": []}, ["must name at least one package (torch)"]),
    ("sglang_sm120_patch", {"sglang_sm120_patch_target_dir": "sglang"},
     ["sglang_sm120_patch_target_dir must be an absolute path (got sglang)"]),
    ("sglang_sm120_patch", {"sglang_sm120_patch_patches": [{"name": "a", "file": "x.py"}, {"name": "a", "file": "y.py"}]},
     ["names: ['a', 'a']"]),
    ("sglang_sm120_patch", {"sglang_sm120_patch_patches": [{"name": "a", "file": "/x.py"}]}, ["files: ['/x.py']"]),
    ("sglang_service", {"sglang_service_user": "Bad User"},
     ["Bad sglang_service settings on gpu1 (nothing was changed)", "sglang_service_user=Bad User"]),
    ("sglang_service", {"sglang_service_state_directory": ".."}, ["sglang_service_state_directory=.."]),
    ("sglang_service", {"sglang_service_device_allow": ["nvidia rw"]}, ["sglang_service_device_allow= ['nvidia rw']"]),
    ("sglang_service", {"sglang_service_device_allow": ["char-nvidia-uvm rw", "/dev/nvidia0 rw"]}, []),
    ("sglang_service", {"sglang_service_address_families": ["inet"]}, ["sglang_service_address_families=['inet']"]),
    ("sglang_service", {"sglang_service_restart_marker": ""}, []),
    ("sglang_service", {"sglang_service_read_write_paths": ["/srv/my models"]}, ["must be absolute paths without spaces"]),
]


@pytest.mark.parametrize("role, changes, words", CASES)
def test_rules(role, changes, words):
    messages = ri.RULES[role](values(role, **changes))
    if not words:
        assert messages == []
        return
    assert len(messages) == 1, messages
    for word in words:
        assert word in messages[0], messages[0]


def test_one_message_per_broken_rule():
    messages = ri.nvidia_driver_rules(values("nvidia_driver", nvidia_driver_branch="x", nvidia_driver_source="apt",
                                             nvidia_driver_secure_boot="on"))
    assert [m.split(" ")[0] for m in messages] == ["nvidia_driver_branch", "Unknown", "nvidia_driver_source"]


def test_spec_errors_come_first_and_are_ansibles_own():
    errors = ri.check_role("sglang_build", spec("sglang_build"),
                           values("sglang_build", sglang_build_dependency_drift="fast", sglang_build_keep_builds=0))
    # The rules wait for a valid spec (they rely on its types): only the spec's message.
    assert errors == ["Validation of arguments failed: value of sglang_build_dependency_drift must be one of: "
                      "install, fail, warn, got: fast"]


def test_check_role_runs_the_rules_after_the_spec():
    assert ri.check_role("cuda_toolkit", spec("cuda_toolkit"), values("cuda_toolkit", cuda_toolkit_version="13"))[0] \
        .startswith("cuda_toolkit_version is '13'")
    assert ri.check_role("model_download", spec("model_download"), {}) == []


def test_report_names_each_role():
    report = ri.format_report({"cuda_toolkit": ["a"], "sglang_build": ["b", "c"]})
    assert report.splitlines() == [
        "3 problems in the roles' variables (nothing was changed; fix them in group_vars/host_vars or -e):",
        "- cuda_toolkit: a", "- sglang_build: b", "- sglang_build: c"]


# Entry points whose options are not main's: calls, not configuration (the router's worker request; the
# start-to-ready seconds the smoke test measured and hands to the service role's record).
NOT_MAIN_OPTIONS = {("sglang_router", "worker"): {"sglang_router_worker_url", "sglang_router_worker_state",
                                                  "sglang_router_delegate", "sglang_router_worker_api_key"},
                    ("sglang_service", "record_ready"): {"sglang_service_ready_seconds"}}


def _all_entry_points():
    for path in sorted(ROLES.glob("*/meta/argument_specs.yml")):
        for entry in yaml.safe_load(path.read_text())["argument_specs"]:
            if entry != "main":
                yield path.parent.parent.name, entry


@pytest.mark.parametrize("role, entry", list(_all_entry_points()))
def test_entry_point_options_are_mains(role, entry):
    """A role checked at main (preflight, or its own first task) needs no check of its other entry points, which
    site.yml and the roles include with rolespec_validate false: each of their options is main's, same definition."""
    main, options = spec(role), spec(role, entry)
    extra = set(options) - set(main)
    assert extra == NOT_MAIN_OPTIONS.get((role, entry), set())
    for name in set(options) & set(main):
        def definition(option):
            return {key: value for key, value in option.items() if key != "description"}
        assert definition(options[name]) == definition(main[name]), name
