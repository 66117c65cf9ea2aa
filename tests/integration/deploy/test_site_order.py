"""site.yml refuses a build before the driver or CUDA change anything (issue 32).

sglang_build's state read refuses a commit whose declared torch pin contradicts the held torch, or whose
Rust extensions have no usable toolchain. In site.yml that read must come before the NVIDIA driver and the
CUDA toolkit, or a refused build would leave a host with a new driver and the old SGLang. The order is
read from ansible-playbook's own task list of the real site.yml (no host is contacted).
"""

from __future__ import annotations

import pathlib

from support.ansible_harness import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
READ = "Read the build's state (packages, interpreter, ref, build, state file, import link, current link)"
REFUSE = "Refuse what the role must not build or switch"


def _task_list(tmp_path, *args):
    proc = run_playbook(tmp_path, ROOT / "site.yml", inventory=None, connection=None,
                        args=("-l", "llm-server", "--list-tasks", *args), callback="ansible.builtin.default",
                        cwd=ROOT, timeout=300)
    assert proc.rc == 0, proc.stdout + proc.stderr
    return [line.strip() for line in proc.stdout.splitlines() if "TAGS:" in line]


def _index(tasks, prefix):
    found = [i for i, task in enumerate(tasks) if task.startswith(prefix)]
    assert found, "no task %r in:\n%s" % (prefix, "\n".join(tasks))
    return found[0]


def test_the_build_refusals_come_before_the_driver_and_cuda(tmp_path):
    tasks = _task_list(tmp_path)
    read = _index(tasks, "gpufleet.llm_server.sglang_build : " + READ)
    refuse = _index(tasks, "gpufleet.llm_server.sglang_build : " + REFUSE)
    driver = _index(tasks, "gpufleet.llm_server.nvidia_driver : ")
    cuda = _index(tasks, "gpufleet.llm_server.cuda_toolkit : ")
    assert read < refuse < driver < cuda, (read, refuse, driver, cuda)
    # One read per run on the no-op path: the steps act on this read instead of reading again.
    assert sum(task.startswith("gpufleet.llm_server.sglang_build : " + READ) for task in tasks) == 1


def test_a_run_of_the_build_alone_still_reads_and_refuses_first(tmp_path):
    tasks = _task_list(tmp_path, "--tags", "sglang-build")
    assert tasks[_index(tasks, "gpufleet.llm_server.sglang_build : ") + 0].startswith(
        "gpufleet.llm_server.sglang_build : " + READ)
    assert _index(tasks, "gpufleet.llm_server.sglang_build : " + REFUSE) < _index(
        tasks, "gpufleet.llm_server.sglang_build : Install the OS packages")
