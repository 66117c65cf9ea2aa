"""Report where `sglang` imports from and its version, without running SGLang's code.

Run by the gpufleet.llm_server.sglang_build role with the target interpreter. With --import it
also imports the package (which needs SGLang's dependencies); with --state FILE it adds the
role's state file (parsed JSON, or null when absent). Prints one JSON object.
"""

import importlib.metadata
import importlib.util
import json
import sys

result = {"python": sys.version.split()[0], "origin": None, "version": None, "imported": None, "import_error": None}
spec = importlib.util.find_spec("sglang")
if spec is not None:
    result["origin"] = spec.origin
    try:
        result["version"] = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        pass
if "--import" in sys.argv[1:] and spec is not None:
    try:
        import sglang  # pylint: disable=import-outside-toplevel

        result["imported"] = sglang.__file__
    except Exception as exc:  # pylint: disable=broad-exception-caught  # reported, the role fails on it
        result["import_error"] = "%s: %s" % (type(exc).__name__, exc)
args = sys.argv[1:]
if "--state" in args:
    try:
        with open(args[args.index("--state") + 1], encoding="utf-8") as handle:
            result["state"] = json.load(handle)
    except FileNotFoundError:
        result["state"] = None
print(json.dumps(result))
