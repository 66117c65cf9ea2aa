"""roles/sglang_service/files/gpufleet-launch, run for real: the secret reaches the module's sys.argv and
environment, but no process's /proc/<pid>/cmdline, not even a child started the way SGLang starts its
scheduler and detokenizer (multiprocessing, start method "spawn", server args passed as Process args)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[3]
LAUNCHER = ROOT / "roles" / "sglang_service" / "files" / "gpufleet-launch"

PROBE = textwrap.dedent('''
    import json, multiprocessing, os, sys

    def child(args, out):
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read().decode()
        with open(out, "w") as f:
            json.dump({"cmdline": cmdline, "args": args}, f)

    def main():
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read().decode()
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=child, args=(sys.argv[1:], os.environ["PROBE_CHILD_OUT"]))
        p.start(); p.join()
        import logging
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
        logging.getLogger("probe").info("server_args=%s", sys.argv[1:])
        print(json.dumps({"argv": sys.argv[1:], "cmdline": cmdline, "token": os.environ.get("HF_TOKEN"),
                          "bench": os.environ.get("OPENAI_API_KEY")}))

    if __name__ == "__main__":
        main()
''')


def _run(tmp_path, *launcher_args, env=None):
    (tmp_path / "probe_module.py").write_text(PROBE)
    full_env = dict(os.environ, PROBE_CHILD_OUT=str(tmp_path / "child.json"), **(env or {}))
    return subprocess.run([sys.executable, str(LAUNCHER), *launcher_args], cwd=tmp_path, env=full_env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_secrets_reach_the_process_but_no_command_line(tmp_path):
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "api-key").write_text("sk-launch-secret")
    (creds / "environment").write_text(json.dumps({"HF_TOKEN": "hf_launch_secret"}))
    keyfile = tmp_path / "bench-key"
    keyfile.write_text("sk-bench-secret")
    proc = _run(tmp_path, "--credential-argument", "api-key=--api-key", "--credential-environment", "environment",
                "--file-environment", "OPENAI_API_KEY=%s" % keyfile, "-m", "probe_module", "--", "--port", "1",
                env={"CREDENTIALS_DIRECTORY": str(creds)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["argv"] == ["--port", "1", "--api-key=sk-launch-secret"]
    assert out["token"] == "hf_launch_secret" and out["bench"] == "sk-bench-secret"
    child = json.loads((tmp_path / "child.json").read_text())
    assert child["args"][-1] == "--api-key=sk-launch-secret"  # pickled through the pipe, as SGLang's ServerArgs
    for cmdline in (out["cmdline"], child["cmdline"]):
        assert not any(v in cmdline for v in ("sk-launch-secret", "hf_launch_secret", "sk-bench-secret")), cmdline
    assert "multiprocessing" in child["cmdline"]
    # the launcher's log redaction: the parsed arguments are logged without the secrets
    assert "server_args=" in proc.stderr and "<redacted>" in proc.stderr
    assert not any(v in proc.stderr for v in ("sk-launch-secret", "hf_launch_secret", "sk-bench-secret"))


def test_missing_credentials_fail_with_the_reason(tmp_path):
    proc = _run(tmp_path, "--credential-argument", "api-key=--api-key", "-m", "probe_module")
    assert proc.returncode == 1 and "$CREDENTIALS_DIRECTORY is not set" in proc.stderr
    (tmp_path / "creds").mkdir()
    proc = _run(tmp_path, "--credential-argument", "api-key=--api-key", "-m", "probe_module",
                env={"CREDENTIALS_DIRECTORY": str(tmp_path / "creds")})
    assert proc.returncode == 1 and "cannot read credential 'api-key'" in proc.stderr and "make-rshared" in proc.stderr
    proc = _run(tmp_path, "--bogus", "-m", "probe_module")
    assert proc.returncode == 1 and "unknown option '--bogus'" in proc.stderr
