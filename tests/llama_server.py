"""``python tests/llama_server.py ARGS``: llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server
ARGS``) with the weights laid out as docaudit's llama.cpp backend lays them out (``--llama-repack auto``: not
repacked on a CPU with AMX, where llama.cpp's AMX path crashes on a quantized file)."""

import runpy

import llama_cpp

from docaudit.query.backends.llamacpp import llama_params, repack_weights

if __name__ == "__main__":
    with llama_params(llama_cpp, repack_weights("auto")):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
