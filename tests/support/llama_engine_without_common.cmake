# Included by CMake at the end of every project() call of the CPU test engine's build
# (tests/support/llama_engine.py passes -DCMAKE_PROJECT_INCLUDE=<this file>).
#
# llama-cpp-python 0.3.36 forces llama.cpp's "common" library on (`set(LLAMA_BUILD_COMMON ON CACHE BOOL ... FORCE)`
# in its CMakeLists.txt), so -DLLAMA_BUILD_COMMON=OFF on the command line is overwritten. That library (llama-common
# and the cpp-httplib it needs: 53 of the build's 127 compile units, measured 2026-12-06) serves llama.cpp's own
# command-line tools; the Python package loads only libllama and libggml* through ctypes. A normal variable outlives
# a forced cache entry under policy CMP0126 (llama-cpp-python asks for CMake 3.21, which sets it NEW), and
# llama.cpp's option(LLAMA_BUILD_COMMON ...) keeps it under CMP0077 (NEW since 3.13).
set(LLAMA_BUILD_COMMON OFF)
