"""The n-gram probe on ground truth, through a real server: the embedded Gemma-3-270M (its Hugging Face conversion)
trained further on short excerpts of a random half of a pool of books, written out as a GGUF file, served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1, and probed over HTTP (``/completions``) against a null
library of excerpts it was never trained on. Beside it, the log-probability detectors (loss, Min-K%++) of the same
trained model on the same excerpts, run in this process. Per dose (total epochs): the probe's per-book AUC, the
detectors', and the share of members (and of non-members) with "evidence" at the level given.

    python scripts/benchmarks/bench_probe_served.py /path/to/corpus/members --work DIR --json out.json

Membership is drawn at random (``split_members``); the library is drawn from the same folder, none of it trained on.
Results are written to ``--json`` after every dose; the training resumes from its checkpoint after an interruption.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from docaudit import api  # noqa: E402
from docaudit.config import DetectorConfig, ModelConfig, ProbeConfig, QueryConfig, TargetConfig  # noqa: E402
from docaudit.lab.experiment import split_members  # noqa: E402
from docaudit.lab.target import train_target  # noqa: E402
from docaudit.run import DetectorSpec, ModelSpec, RunContext  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DETECTORS = ("loss", "minkpp")


def base_model() -> Path:
    """The embedded Gemma's Hugging Face conversion in the cache (made by any first run of docaudit)."""
    found = sorted(glob.glob(str(Path.home() / ".cache/docaudit/models/gemma-3-270m-q4_k_m-*/config.json")))
    if not found:
        sys.exit("the embedded Gemma's conversion is not cached: run any docaudit command on a book once")
    return Path(found[0]).parent


def template_gguf() -> Path:
    return Path.home() / ".cache/docaudit/models/gemma-3-270m-q4_k_m.gguf"


def pick(folder: Path, n: int, words: int, seed: int) -> dict[str, str]:
    """``words`` words from the middle of ``n`` books of ``folder`` drawn at random (far from headers)."""
    paths = sorted(folder.glob("*.txt"))
    chosen = np.random.default_rng(seed).choice(len(paths), size=n, replace=False)
    out = {}
    for i in sorted(chosen):
        text = paths[i].read_text(encoding="utf-8").replace("\r\n", "\n").split()
        mid = len(text) // 2
        out[paths[i].stem] = " ".join(text[mid : mid + words])
    return out


def draw_lab(corpus: Path, pool: int, library: int, words: int, seed: int) -> tuple[dict, dict, dict]:
    """Excerpts of ``pool + library`` books of ``corpus`` drawn at random: the pool (split at random into members,
    1, and non-members, 0) and the never-trained library, by book name; and the split."""
    texts = pick(corpus, pool + library, words, seed)
    names = sorted(texts)
    order = np.random.default_rng(seed + 1).permutation(len(names))
    drawn = {names[i]: texts[names[i]] for i in order[:pool]}
    rest = {names[i]: texts[names[i]] for i in order[pool:]}
    return drawn, rest, split_members(sorted(drawn), seed=seed)


def export_gguf(model_dir: Path, template: Path, out: Path, norm_offset: float = 1.0) -> Path:
    """The trained model as a GGUF file: the embedded GGUF's metadata and tokenizer, every tensor replaced by the
    trained one (float16 matrices, float32 norms; llama.cpp stores Gemma's norm weights as ``norm_offset`` + w,
    1 as ``convert_hf_to_gguf`` writes them and transformers' GGUF reader undoes)."""
    import gguf
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    state = model.state_dict()
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA3, model.config.num_hidden_layers)
    by_gguf = {}
    for hf_name in state:
        base, suffix = hf_name.rsplit(".", 1)
        mapped = names.get_name(base)
        if mapped is not None:
            by_gguf[f"{mapped}.{suffix}"] = hf_name
    reader = gguf.GGUFReader(str(template))
    writer = gguf.GGUFWriter(str(out), "gemma3")
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        main = field.types[0]
        sub = field.types[-1] if main == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), main, sub_type=sub)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for tensor in reader.tensors:
        w = state[by_gguf[tensor.name]].numpy()
        if tensor.name.endswith("norm.weight"):
            writer.add_tensor(tensor.name, (w + norm_offset).astype(np.float32))
        else:
            writer.add_tensor(tensor.name, w.astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(gguf_path: Path, alias: str, threads: int, port: int | None) -> tuple[subprocess.Popen, str]:
    """llama-cpp-python's server for ``gguf_path`` as ``alias`` on ``port`` (None: a free one), once it answers.
    The cache keys hold the address: a rerun on the same port takes the answers already written."""
    port = port or free_port()
    command = [sys.executable, str(ROOT / "tests" / "llama_server.py"), "--model", str(gguf_path)]
    command += ["--model_alias", alias, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "512"]
    command += ["--n_threads", str(threads), "--n_threads_batch", str(threads), "--seed", "0"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        if process.poll() is not None:
            sys.exit(f"the server for {gguf_path} exited with status {process.returncode}")
        try:
            urllib.request.urlopen(base + "/models", timeout=2).read()
            return process, base
        except OSError:
            time.sleep(0.5)
    process.terminate()
    sys.exit("the server did not answer within 5 minutes")


def write_texts(texts: dict[str, str], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for name, text in sorted(texts.items()):
        path = folder / f"{name}.txt"
        path.write_text(text, encoding="utf-8")
        files.append(path)
    return files


def measure(model_dir: Path, base: str, alias: str, books: list[Path], library: list[Path], args) -> dict:
    """The probe over HTTP and the detectors in this process, on the same books."""
    probe = ProbeConfig(
        endpoint="completions",
        passages=args.passages,
        prompt_words=args.prompt_words,
        continuation_words=args.continuation_words,
        samples=args.samples,
        new_tokens=args.new_tokens,
        min_library=len(library),
    )
    run = RunContext(seed=args.seed)
    served = ModelConfig(api_base=base, api_model=alias, api_timeout=600.0)
    began = time.monotonic()
    probed = api.probe(api.ProbeRequest(books, served, library, probe, run=run))
    seconds = time.monotonic() - began
    rows = detector_scores(model_dir, books, args.words, run)
    return {"probe": {Path(r["file"]).stem: r for r in probed.rows}, "scores": rows, "probe_seconds": seconds}


def detector_scores(model_dir: Path, files: list[Path], words: int, run: RunContext) -> dict[str, dict]:
    """Loss and Min-K%++ of the model in ``model_dir`` on each file (one window over a whole excerpt of ``words``
    words), by file stem."""
    scored = api.score(
        api.ScoreRequest(
            files,
            ModelSpec(ModelConfig(model=str(model_dir))),
            QueryConfig(context=words * 3, stride=words * 3 - 1),
            DetectorSpec(",".join(DETECTORS), DetectorConfig()),
            run=run,
        )
    )
    return {Path(r["file"]).stem: r for r in scored.rows if "skipped" not in r}


def summary(measured: dict, labels: dict[str, int]) -> dict:
    names = sorted(labels)
    y = [labels[n] for n in names]
    out = {"probe_auc": float(roc_auc_score(y, [measured["probe"][n]["statistic"] for n in names]))}
    for d in DETECTORS:
        out[f"{d}_auc"] = float(roc_auc_score(y, [measured["scores"][n][d] for n in names]))
    for group, want in (("members", 1), ("nonmembers", 0)):
        verdicts = [measured["probe"][n]["verdict"] for n in names if labels[n] == want]
        out[f"{group}_evidence"] = sum(v == "evidence" for v in verdicts) / len(verdicts)
    out["probe_seconds"] = measured["probe_seconds"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="a folder of books (.txt)")
    parser.add_argument("--pool", type=int, default=40, help="books split at random into members and non-members")
    parser.add_argument("--library", type=int, default=20, help="further books never trained on: the null library")
    parser.add_argument("--words", type=int, default=150, help="words per excerpt")
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 3], help="the doses (total epochs)")
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--passages", type=int, default=2)
    parser.add_argument("--prompt-words", type=int, default=20)
    parser.add_argument("--continuation-words", type=int, default=30)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--port", type=int, default=None, help="the server's port (default: a free one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, required=True, help="a folder for the targets, GGUF files and cache")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    import torch

    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))  # so that the server is stopped with it

    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DOCAUDIT_CACHE", str(args.work / "cache"))
    pool, library, split = draw_lab(args.corpus, args.pool, args.library, args.words, args.seed)
    members = [pool[n] for n in sorted(pool) if split[n] == 1]
    books = write_texts(pool, args.work / "books")
    null = write_texts(library, args.work / "library")
    results = {"settings": vars(args) | {"corpus": str(args.corpus), "work": str(args.work), "json": str(args.json)}}
    results["labels"], results["doses"] = {n: int(split[n]) for n in sorted(pool)}, []
    for epochs in sorted(args.epochs):
        config = TargetConfig(
            epochs=epochs, positions=128, batch_size=4, doc_tokens=512, learning_rate=args.learning_rate
        )
        began = time.monotonic()
        model_dir = train_target(
            members, list(pool.values()), args.work / "target", config, str(base_model()), RunContext(seed=args.seed)
        )
        trained = time.monotonic() - began
        gguf_path = export_gguf(model_dir, template_gguf(), args.work / f"dose-{epochs}.gguf")
        alias = f"gemma-270m-dose-{epochs}-seed-{args.seed}"
        process, base = serve(gguf_path, alias, args.threads, args.port)
        try:
            measured = measure(model_dir, base, alias, books, null, args)
        finally:
            process.terminate()
            process.wait()
        results["doses"].append(
            {"epochs": epochs, "train_seconds": trained, **summary(measured, results["labels"]), "raw": measured}
        )
        args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        d = results["doses"][-1]
        print(
            f"epochs {epochs}: probe AUC {d['probe_auc']:.3f}, loss {d['loss_auc']:.3f}, "
            f"Min-K%++ {d['minkpp_auc']:.3f}; evidence in {d['members_evidence']:.0%} of members, "
            f"{d['nonmembers_evidence']:.0%} of non-members",
            flush=True,
        )


if __name__ == "__main__":
    main()
