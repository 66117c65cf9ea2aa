"""Eleven adversarial secrets (issue 34; adversarial_secrets.json, also read by molecule/sglang_service),
shared by the launcher's log-redaction tests and preflight's tests.

Each is >= 8 characters and holds no line break (gpufleet-launch's and sglang_preflight's limits):
backslashes, both quote kinds, '%' (also valid URL escapes), '$' (shell and systemd syntax), non-ASCII
(Latin-1, BMP, astral), a leading '-', whitespace and shell metacharacters."""

import json
import pathlib

ADVERSARIAL = json.loads((pathlib.Path(__file__).parent / "adversarial_secrets.json").read_text(encoding="utf-8"))
assert len(ADVERSARIAL) == 11
