# Included by CMake at the end of every project() call of the CPU test engine's build
# (tests/support/llama_engine.py passes -DCMAKE_PROJECT_INCLUDE=<this file>). Two cuts of the build's CPU time,
# neither of which changes what the engine computes (issue 36).
#
# 1. llama-cpp-python 0.3.36 forces llama.cpp's "common" library on (`set(LLAMA_BUILD_COMMON ON CACHE BOOL ... FORCE)`
# in its CMakeLists.txt), so -DLLAMA_BUILD_COMMON=OFF on the command line is overwritten. That library (llama-common
# and the cpp-httplib it needs: 53 of the build's 127 compile units, measured 2026-12-06) serves llama.cpp's own
# command-line tools; the Python package loads only libllama and libggml* through ctypes. A normal variable outlives
# a forced cache entry under policy CMP0126 (llama-cpp-python asks for CMake 3.21, which sets it NEW), and
# llama.cpp's option(LLAMA_BUILD_COMMON ...) keeps it under CMP0077 (NEW since 3.13).
set(LLAMA_BUILD_COMMON OFF)

# 2. libllama (model loading, tokenizer, graph building, sampling: C++ that is slow to optimise, not the arithmetic) at
# -O1; ggml's kernels keep the Release flags. Measured 2026-12-07 on the 2-core AMD VM (pip's process tree, user + sys):
# 271 -> 222 CPU s for the build, libggml*.so byte-identical, 400 greedy tokens at the same pace (69-73 tokens/s both).
# The variable is directory-scoped: set in llama.cpp's scope (its src/ holds libllama), then unset in ggml's, a
# subdirectory of llama.cpp, which makes the cached Release flags visible there again.
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(CMAKE_C_FLAGS_RELEASE "-O1 -DNDEBUG")
  set(CMAKE_CXX_FLAGS_RELEASE "-O1 -DNDEBUG")
elseif(PROJECT_NAME STREQUAL "ggml")
  unset(CMAKE_C_FLAGS_RELEASE)
  unset(CMAKE_CXX_FLAGS_RELEASE)
endif()
