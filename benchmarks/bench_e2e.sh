#!/usr/bin/env bash
# End-to-end check of playbooks/benchmark.yml against a real engine on this machine (not in make test:
# it needs a 6 GB venv with SGLang's bench dependencies, torch included, and minutes of CPU time).
#   benchmarks/bench_e2e.sh [RUN_NAME ...]        # default: two runs, smollm2-q4-a and smollm2-q4-b
# - engine: llama-cpp-python[server] serving SmolLM2-135M-Instruct (tests/support/llama_engine.py,
#   cached in $GPUFLEET_CACHE) on 127.0.0.1:32200, through its OpenAI /v1/completions (backend sglang-oai);
# - bench_serving: SGLang 0.5.10.post1 (pure-Python release) in $GPUFLEET_CACHE/bench-venv with the
#   modules its import chain needs; tokenizer: the GGUF's tokenizer converted with transformers;
# - output: $OUT (default /tmp/gpufleet-bench-e2e)/results/report.md and report.png.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${GPUFLEET_CACHE:-$HOME/.cache/gpufleet}
out=${OUT:-/tmp/gpufleet-bench-e2e}
runs=("$@"); [ ${#runs[@]} -gt 0 ] || runs=(smollm2-q4-a smollm2-q4-b)
venv=$cache/bench-venv
mkdir -p "$out"
if [ ! -f "$venv/.complete" ]; then
  python3 -m venv "$venv"
  sdist=$("$root/.venv/bin/python" -c "import sys; sys.path.insert(0, '$root/tests'); from support import pypi; print(pypi.download('sglang', '0.5.10.post1'))")
  "$venv/bin/pip" install -q --no-deps "$sdist"
  # What `python -m sglang.bench_serving` imports (sglang/__init__ pulls in the frontend, hence torch).
  "$venv/bin/pip" install -q aiohttp numpy requests tqdm 'transformers==5.3.0' pybase64 IPython pillow \
    datasets orjson torch torchvision starlette pyzmq gguf
  touch "$venv/.complete"
fi
model=$("$root/.venv/bin/python" "$root/tests/support/llama_engine.py" | sed -n 's/^model: //p')
tok=$out/tokenizer
[ -f "$tok/tokenizer.json" ] || "$venv/bin/python" - "$model" "$tok" <<'PY'
import os, sys
from transformers import AutoTokenizer
gguf, dest = sys.argv[1], sys.argv[2]
AutoTokenizer.from_pretrained(os.path.dirname(gguf), gguf_file=os.path.basename(gguf)).save_pretrained(dest)
PY
cat > "$out/inventory.yml" <<INV
all:
  children:
    llm_servers:
      hosts:
        bench-local: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}
INV
cat > "$out/vars.yml" <<VARS
llm_server_model: smollm2
llm_server_models:
  smollm2: {model_path: $tok, served_model_name: smollm2, host: 127.0.0.1, port: 32200}
benchmark_python: $venv/bin/python
benchmark_backend: sglang-oai
benchmark_concurrency: [1, 2]
benchmark_min_prompts: 2
benchmark_prompts_per_slot: 1
benchmark_prompt_sets:
  - {name: in32-out16, dataset_name: random-ids, input_len: 32, output_len: 16, warmup_requests: 0}
benchmark_results_dir: $out/results
VARS
(cd "$root/tests" && exec "$root/.venv/bin/python" -c "
import sys, time, pathlib
sys.path.insert(0, '.')
from support.llama_engine import LlamaServer
with LlamaServer(32200, model_alias='smollm2', log_path=pathlib.Path('$out/llama.log')):
    print('engine ready', flush=True)
    time.sleep(3600)
") &
engine=$!
trap 'kill $engine 2>/dev/null || true' EXIT
until curl -sf http://127.0.0.1:32200/v1/models >/dev/null; do sleep 1; kill -0 $engine || exit 1; done
for run in "${runs[@]}"; do
  "$root/.venv/bin/ansible-playbook" -i "$out/inventory.yml" -e @"$out/vars.yml" -e benchmark_run="$run" \
    "$root/playbooks/benchmark.yml"
done
echo "report: $out/results/report.md $out/results/report.png"
