#!/usr/bin/env bash
# The CPU test engine on another CPU: build llama-cpp-python twice on the machine that runs this,
# once as its sdist builds by default (-march=native) and once with tests/support/llama_engine.py's
# portable flags; scan both for AVX-512/AMX instructions; run one completion with each, without and
# with the C++ runtime preloaded (llama_engine.engine_env); then run the engine's own self-check and
# one chat completion through its OpenAI server with the portable build. Run on the GPU test host
# (an x86-64 server CPU unlike the CI machine's) through the device tool: user-space code only.
#   usage: run_engine_portability.sh CARRY_DIR
#   CARRY_DIR: llama-cpp-python-<version>-stripped.tar.gz (the PyPI sdist without models, docs,
#   tests and GPU backends, to fit the transfer limit), one GGUF model (tests/hardware/truncate_gguf.py:
#   SmolLM2-135M-Instruct.Q4_1 cut to 4 blocks), and whl/ with the wheels of llama_engine.SERVER_PINS
#   that the host lacks (for Python 3.12), diskcache among them.
set -uo pipefail
carry=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/engine-portability}
mkdir -p "$out" /tmp/eng && cd /tmp/eng || exit 1
model=/tmp/eng/model.gguf
cp "$carry"/*.gguf "$model" || exit 1

{
  echo "## CPU"; grep -m1 'model name' /proc/cpuinfo; nproc
  echo "flags of interest: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' ')"
  uname -r; python3 --version; gcc --version | head -1; cmake --version | head -1
} | tee "$out/cpu.txt"

python3 -m pip install -q --no-index --no-deps --target /tmp/eng/site "$carry"/whl/*.whl || exit 1
tar xzf "$carry"/llama-cpp-python-*-stripped.tar.gz -C /tmp/eng || exit 1
src=$(ls -d /tmp/eng/llama_cpp_python-*)
portable=$(cd "$root/tests" && python3 -c 'from support import llama_engine; print(" ".join(llama_engine.X86_64_CMAKE_ARGS))')

build() {  # build FLAVOUR CMAKE_ARGS
  local t0=$SECONDS
  CMAKE_ARGS=$2 CMAKE_BUILD_PARALLEL_LEVEL=8 python3 -m pip install -q --no-index --no-deps --no-build-isolation \
    --target "/tmp/eng/$1" "$src" >"$out/build-$1.log" 2>&1
  echo "build $1: exit $? in $((SECONDS - t0)) s"
}
build native "" & native_pid=$!
build portable "$portable" & portable_pid=$!
wait $native_pid; wait $portable_pid

cat >/tmp/eng/complete.py <<'PY'
import json, sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=int(sys.argv[2]), seed=0, verbose=False)
print(json.dumps(llm.create_completion("The capital of France is", max_tokens=8, temperature=0.0)["choices"][0]["text"]))
PY
preload=$(cd "$root/tests" && PYTHONPATH=/tmp/eng/portable:/tmp/eng/site:$root/tests python3 -c 'import pathlib, sys; from support import llama_engine
print(llama_engine.engine_env(pathlib.Path(sys.executable)).get("LD_PRELOAD", ""))')
echo "## ldd libllama.so (portable)"; ldd /tmp/eng/portable/llama_cpp/lib/libllama.so | tee "$out/ldd.txt"
for flavour in native portable; do
  lib="/tmp/eng/$flavour/llama_cpp/lib"
  [ -d "$lib" ] || { echo "$flavour: not built"; continue; }
  scan=$(cd "$root/tests" && python3 -c "import json, pathlib, sys; from support import llama_engine
print(json.dumps(llama_engine.scan_instructions(pathlib.Path(sys.argv[1]))['libggml-cpu.so']))" "$lib")
  echo "$flavour libggml-cpu.so: $scan"
  for with in "" "$preload"; do
    t0=$SECONDS
    text=$(LD_PRELOAD=$with PYTHONPATH="/tmp/eng/$flavour:/tmp/eng/site" timeout 300 python3 /tmp/eng/complete.py "$model" 1 2>/dev/null)
    rc=$?
    echo "$flavour LD_PRELOAD=${with:-none}: exit $rc ($( [ $rc -gt 128 ] && kill -l $((rc - 128)) || echo ok)) in $((SECONDS - t0)) s: $text"
  done
done | tee "$out/results.txt"

echo "## llama_engine.self_check and the OpenAI server, portable build" | tee -a "$out/results.txt"
export PYTHONPATH=/tmp/eng/portable:/tmp/eng/site
(cd "$root/tests" && timeout 300 python3 - "$model" <<'PY'
import json, pathlib, subprocess, sys, time, urllib.request
from support import llama_engine
python, model = pathlib.Path(sys.executable), pathlib.Path(sys.argv[1])
report = llama_engine.self_check(python, model)
print("self_check:", json.dumps({k: report[k] for k in ("completion", "completion_tokens", "seconds")}))
cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", "32299",
       "--n_ctx", "512", "--n_threads", "2", "--model_alias", "smollm2"]
server = subprocess.Popen(cmd, env=llama_engine.engine_env(python), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
try:
    for _ in range(240):
        try:
            urllib.request.urlopen("http://127.0.0.1:32299/v1/models", timeout=2).read()
            break
        except OSError:
            assert server.poll() is None, f"server exited {server.returncode}"
            time.sleep(0.5)
    body = json.dumps({"model": "smollm2", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}).encode()
    req = urllib.request.Request("http://127.0.0.1:32299/v1/chat/completions", body, {"Content-Type": "application/json"})
    answer = json.loads(urllib.request.urlopen(req, timeout=120).read())
    print("server chat:", answer["choices"][0]["finish_reason"], answer["usage"])
finally:
    server.terminate()
PY
) 2>&1 | tail -5 | tee -a "$out/results.txt"
