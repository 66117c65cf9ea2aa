"""molecule/shared/create.yml and destroy.yml, Molecule's create and destroy steps for every scenario (issue 36):
they replace molecule-plugins' docker playbooks, so they must start the same container from a scenario's platform,
refuse a platform setting they do not apply, and destroy what is there and what is not.

Real parts: ansible-playbook runs the two playbooks as Molecule does (connection local, the scenario's platforms in
molecule_yml), the real Docker engine and the Molecule base image (scripts/build-base-image.sh). No test double.
The platform is molecule/default's own, read from its molecule.yml, under another container name.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import uuid

import yaml

from support.ansible_harness import ROOT, run_playbook
from support.requires import require_for_module

CREATE = ROOT / "molecule" / "shared" / "create.yml"
DESTROY = ROOT / "molecule" / "shared" / "destroy.yml"
DEFAULT_IMAGE = "gpufleet/debian12-systemd:latest"
IMAGE = os.environ.get("GPUFLEET_MOLECULE_IMAGE", DEFAULT_IMAGE)  # as Molecule interpolates molecule.yml


def _image_present() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False).returncode == 0


require_for_module(not _image_present(), "docker and the image %s (scripts/build-base-image.sh)" % IMAGE)


def default_platform(name: str) -> dict:
    """molecule/default's platform, its image interpolated as Molecule does."""
    platform = yaml.safe_load((ROOT / "molecule" / "default" / "molecule.yml").read_text())["platforms"][0]
    assert platform["image"] == "${GPUFLEET_MOLECULE_IMAGE:-%s}" % DEFAULT_IMAGE, platform["image"]
    return dict(platform, name=name, image=IMAGE)


def run_step(tmp_path: pathlib.Path, playbook: pathlib.Path, platforms: list[dict]):
    # Molecule's inventory gives localhost the controller's own Python, as here
    extra = {"molecule_yml": {"platforms": platforms}, "molecule_no_log": False,
             "ansible_python_interpreter": sys.executable}
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    return run_playbook(tmp_path, playbook, args=("-e", "@%s" % (tmp_path / "extra.json")), timeout=300)


def inspect(name: str) -> dict | None:
    proc = subprocess.run(["docker", "container", "inspect", name], capture_output=True, text=True, check=False)
    return json.loads(proc.stdout)[0] if proc.returncode == 0 else None


def container_name() -> str:
    return "gpufleet-create-test-%s" % uuid.uuid4().hex[:8]


def test_create_starts_the_scenario_s_container_and_destroy_removes_it_even_twice(tmp_path):
    name = container_name()
    platform = default_platform(name)
    try:
        created = run_step(tmp_path, CREATE, [platform])
        assert created.rc == 0, created.stdout + created.stderr
        container = inspect(name)
        assert container is not None and container["State"]["Running"], container
        host, config = container["HostConfig"], container["Config"]
        # Each platform setting of molecule.yml, as docker reports it back
        assert [cap.removeprefix("CAP_") for cap in host["CapAdd"]] == platform["capabilities"]
        assert host["CgroupnsMode"] == platform["cgroupns_mode"]
        assert host["SecurityOpt"] == platform["security_opts"]
        assert host["Binds"] == platform["volumes"]
        assert sorted(host["Tmpfs"]) == sorted(platform["tmpfs"])
        assert host["NetworkMode"] == platform["network_mode"]
        assert config["StopSignal"] == platform["stop_signal"]
        assert config["Cmd"] == platform["command"].split()
        assert config["Image"] == IMAGE and config["Hostname"] == name
        assert config["Labels"].get("owner") == "molecule"
        assert host["LogConfig"]["Type"] == "json-file"

        destroyed = run_step(tmp_path, DESTROY, [platform])
        assert destroyed.rc == 0, destroyed.stdout + destroyed.stderr
        assert inspect(name) is None
        assert [result["changed"] for result in destroyed.result["results"]] == [True]

        # Molecule's first destroy runs where there is nothing to destroy
        again = run_step(tmp_path, DESTROY, [platform])
        assert again.rc == 0, again.stdout + again.stderr
        assert [result["changed"] for result in again.result["results"]] == [False]
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, check=False)


def refused_create(tmp_path: pathlib.Path, **setting) -> tuple[str, str]:
    """Run create.yml on molecule/default's platform plus SETTING; it must fail and start no container.
    Returns (the container's name, the run's JSON output as text)."""
    name = container_name()
    try:
        run = run_step(tmp_path, CREATE, [dict(default_platform(name), **setting)])
        assert run.rc != 0
        assert inspect(name) is None
        return name, json.dumps(run.output)
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, check=False)


def test_create_refuses_a_platform_setting_it_does_not_apply_before_starting_anything(tmp_path):
    name, message = refused_create(tmp_path, privileged=True)
    assert "platform %s: privileged" % name in message, message
    assert "molecule/shared/create.yml" in message, message


def test_create_refuses_an_image_molecule_would_build(tmp_path):
    _name, message = refused_create(tmp_path, pre_build_image=False)
    assert "pre_build_image: true is required" in message, message


def test_every_scenario_uses_the_shared_create_and_destroy():
    # The base config names them relative to a scenario's directory (Molecule's rule); no scenario names its own.
    base = yaml.safe_load((ROOT / ".config" / "molecule" / "config.yml").read_text())
    playbooks = base["provisioner"]["playbooks"]
    scenarios = sorted(p.parent for p in (ROOT / "molecule").glob("*/molecule.yml"))
    assert len(scenarios) >= 10, scenarios
    for scenario in scenarios:
        assert (scenario / playbooks["create"]).resolve() == CREATE, scenario
        assert (scenario / playbooks["destroy"]).resolve() == DESTROY, scenario
        own = (yaml.safe_load((scenario / "molecule.yml").read_text()).get("provisioner") or {}).get("playbooks") or {}
        assert not {"create", "destroy"} & set(own), (scenario, own)
