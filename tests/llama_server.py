"""``python tests/llama_server.py ARGS``: llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server
ARGS``) with the weights laid out as docaudit's llama.cpp backend lays them out (``--llama-repack auto``: not
repacked on a CPU with AMX, where llama.cpp's AMX path crashes on a quantized file). With ``--chat-only`` first,
the same server without its completions routes: it serves ``/v1/chat/completions`` alone, as a chat-only API
does. With ``--no-echo`` first, a server that ignores ``echo`` (it never returns its prompt's log-probabilities),
as many hosted completions APIs do."""

import runpy
import sys

import llama_cpp

from docaudit.query.backends.llamacpp import llama_params, repack_weights

COMPLETIONS = ("/v1/completions", "/v1/engines/copilot-codex/completions")


def without_echo() -> None:
    """Every completion written as if ``echo`` were false."""
    create = llama_cpp.Llama.create_completion

    def create_completion(self, *args, **kwargs):
        return create(self, *args, **{**kwargs, "echo": False})

    llama_cpp.Llama.create_completion = create_completion


if __name__ == "__main__":
    if sys.argv[1:2] == ["--no-echo"]:
        del sys.argv[1]
        without_echo()
    if sys.argv[1:2] == ["--chat-only"]:
        import llama_cpp.server.app

        del sys.argv[1]
        router = llama_cpp.server.app.router  # the routes the app includes when it is created
        router.routes = [r for r in router.routes if getattr(r, "path", None) not in COMPLETIONS]
    with llama_params(llama_cpp, repack_weights("auto")):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
