"""ServerArgs and the scheduler of the leak probe (leak_probe.py), in a module of their own as in SGLang:
the spawned child imports it. Facts from SGLang 0.5.10.post1 (the wheel from PyPI): ServerArgs is a
dataclass with `api_key: Optional[str]` (sglang/srt/server_args.py); each process logs it with
`logger.info(f"{server_args=}")` (sglang/srt/entrypoints/engine.py) after configure_logger's
logging.basicConfig to stderr (sglang/srt/utils/common.py)."""

import dataclasses
import json
import logging
import os
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    api_key: Optional[str] = None
    env: Optional[dict] = None


def scheduler(server_args):
    logging.basicConfig(level=logging.INFO, format="[child] %(message)s", force=True)
    # the text of SGLang's logger.info(f"{server_args=}") ("server_args=" + repr), lazily formatted
    logging.getLogger("child").info("server_args=%r", server_args)
    print("child json", json.dumps(dataclasses.asdict(server_args)), flush=True)
    print("child environ", {k: v for k, v in os.environ.items() if k.startswith("PROBE_")}, flush=True)
    raise RuntimeError("scheduler died with key %r" % server_args.api_key)
