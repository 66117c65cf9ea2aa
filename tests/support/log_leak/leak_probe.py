"""A stand-in for SGLang's server that logs its secrets every way the real one does or could, run through
gpufleet-launch (`-m leak_probe`, the API key as its last argument `--api-key=KEY`, further secrets in
environment variables PROBE_*): the f"{server_args=}" repr of a dataclass in the main process and in a
child started with multiprocessing's "spawn" method (as SGLang starts its scheduler and detokenizer),
JSON (ASCII and not), URL-encoded, %r of argv and environment, a repr of a repr, bytes, print(), a
handled and an unhandled traceback in both processes, a non-Python child (/bin/sh), and a line longer
than the launcher's read size with no line break. Used by tests/unit/service/test_gpufleet_launch.py and
molecule/sglang_service (the journal of a transient unit)."""

import json
import logging
import multiprocessing
import os
import subprocess
import sys
import traceback
import urllib.parse

from leak_args import ServerArgs, scheduler


def main():
    logging.basicConfig(level=logging.INFO, format="[main] %(message)s")
    log = logging.getLogger("main")
    key = sys.argv[-1].split("=", 1)[1]
    secrets = [key] + [v for k, v in sorted(os.environ.items()) if k.startswith("PROBE_")]
    server_args = ServerArgs(model_path="/m", api_key=key, env={k: v for k, v in os.environ.items() if k.startswith("PROBE_")})
    # the text of SGLang's logger.info(f"{server_args=}") ("server_args=" + repr), lazily formatted
    log.info("server_args=%r", server_args)
    log.info("argv %r", sys.argv)
    for secret in secrets:
        log.info("json %s", json.dumps({"api_key": secret}))
        log.info("json-utf8 %s", json.dumps({"api_key": secret}, ensure_ascii=False))
        log.info("url http://h/?key=%s and %s", urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret))
        log.info("repr of repr %r", [repr(secret)])
        log.info("bytes %r", secret.encode())
        print("print", secret, repr(secret), ascii(secret), flush=True)
        try:
            raise ValueError({"api_key": secret})
        except ValueError:
            traceback.print_exc()
        sys.stdout.write("long " + "x" * 70000 + secret + "y" * 10 + secret + "\n")
        sys.stdout.flush()
    subprocess.run(["/bin/sh", "-c", "env | grep '^PROBE_' | sed 's/^/shell /'; env | grep '^PROBE_' | sed 's/^/shell-err /' >&2"],
                   check=True)
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=scheduler, args=(server_args,))
    proc.start()
    proc.join()
    log.info("child exit %s", proc.exitcode)
    raise SystemExit("fatal: bad key %s" % key)


if __name__ == "__main__":
    main()
