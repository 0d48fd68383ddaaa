"""`cache info` counts every kind of entry docaudit writes, `cache clear --kind` removes each kind, and nothing
docaudit did not write is touched (real entries, written by docaudit itself in a temporary DOCAUDIT_CACHE)."""

import json

import pytest
from test_cache import make_gguf
from test_cli import assert_clean_error, make_sets, run

from docaudit.untrusted import sha256_untrusted


def _files(folder):
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _size(folder):
    return sum(p.stat().st_size for p in _files(folder))


def _info():
    done = run("cache", "info", "--format", "json")
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_every_kind_is_counted_and_cleared_alone(tmp_path, tiny_gpt2):
    from docaudit.query.sources import gguf_tokenizer

    cache = tmp_path / "cache"
    sets = make_sets(tmp_path)
    gguf = make_gguf(tmp_path / "tiny.gguf")
    # statistics and a weights-hash memo (a local model folder), a converted model (a .gguf through
    # transformers) and a tokenizer read from the GGUF file: each written by docaudit
    for model in (tiny_gpt2, gguf):
        done = run("score", sets["mem"], "--model", model, "--context", "32", "--methods", "loss")
        assert done.exit_code == 0, done.output
    gguf_tokenizer(gguf, sha256_untrusted(gguf, "weights"))
    (converted,) = (cache / "models").iterdir()
    (tokenizer,) = (cache / "tokenizers").iterdir()
    (memo,) = (cache / "weights-hash").iterdir()
    # what docaudit did not write: a file beside each kind, a folder without a conversion record, a link
    foreign = [
        cache / "notes.txt",
        cache / "models" / "mine-0123456789abcdef" / "config.json",
        cache / "tokenizers" / "readme.md",
        cache / "weights-hash" / "abc.txt",
        cache / "stats" / "ab" / "mine.npz",
    ]
    for f in foreign:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("not docaudit's")
    (cache / "models" / "linked-0123456789abcdef").symlink_to(converted, target_is_directory=True)

    summary = _info()
    kinds = summary["kinds"]
    assert kinds["stats"]["entries"] == 8 and kinds["stats"]["bytes"] == _size(cache / "stats") - len("not docaudit's")
    assert kinds["models"] == {"entries": 1, "bytes": _size(converted), "what": kinds["models"]["what"]}
    assert kinds["tokenizers"]["entries"] == 1 and kinds["tokenizers"]["bytes"] == _size(tokenizer)
    assert kinds["hashes"]["entries"] == 1 and kinds["hashes"]["bytes"] == memo.stat().st_size
    assert kinds["bench"] == {"entries": 0, "bytes": 0, "what": kinds["bench"]["what"]}
    # each model's load time, and the rest of `score` beside its passes, measured by the runs above
    assert kinds["rates"]["entries"] == 3
    assert summary["entries"] == 14 and summary["bytes"] == sum(k["bytes"] for k in kinds.values())
    assert summary["bytes"] > _size(cache / "stats")  # more than the statistics alone
    assert summary["other"]["files"] == len(foreign) + 1  # the link counts too, as someone else's
    assert set(summary["other"]["paths"]) >= {str(f.relative_to(cache)) for f in foreign}
    table = run("cache", "info").stdout
    assert "14 entries" in table and "tokenizers" in table and "6 other files" in table

    # each kind alone: its entries go, every other kind and every foreign file stays
    rates = cache / "rates"
    for kind, gone in (("tokenizers", tokenizer), ("models", converted), ("hashes", memo), ("rates", rates)):
        before = _info()["kinds"]
        done = run("cache", "clear", "--kind", kind, "--yes")
        assert done.exit_code == 0, done.output
        assert f"removed {before[kind]['entries']} entries" in done.stdout
        after = _info()["kinds"]
        assert not gone.exists() and after[kind]["entries"] == 0
        assert {k: v for k, v in after.items() if k != kind} == {k: v for k, v in before.items() if k != kind}
        assert all(f.read_text() == "not docaudit's" for f in foreign)
    assert (cache / "models" / "linked-0123456789abcdef").is_symlink()
    done = run("cache", "clear", "--kind", "all", "--yes")
    assert done.exit_code == 0 and "removed 8 entries" in done.stdout  # the statistics
    assert _info()["entries"] == 0 and all(f.read_text() == "not docaudit's" for f in foreign)
    assert_clean_error(run("cache", "clear", "--kind", "models", "--model", "x", "--yes"), "--model selects token")


def test_default_clear_keeps_models_and_tokenizers(tmp_path):
    from docaudit.query.sources import gguf_tokenizer

    gguf = make_gguf(tmp_path / "tiny.gguf")
    gguf_tokenizer(gguf, sha256_untrusted(gguf, "weights"))
    done = run("cache", "clear", "--yes")  # the default: token statistics only, as before
    assert done.exit_code == 0 and "removed 0 entries" in done.stdout
    assert _info()["kinds"]["tokenizers"]["entries"] == 1
    assert "--kind" in run("cache", "clear", "--help").stdout


@pytest.mark.slow
def test_the_embedded_models_gguf_counts_as_a_model(tmp_path):
    from docaudit.query.sources import embedded_gguf

    path, _ = embedded_gguf()  # assembled from its package into the cache (~250 MB)
    models = _info()["kinds"]["models"]
    assert models["entries"] == 1 and models["bytes"] == path.stat().st_size
    done = run("cache", "clear", "--kind", "models", "--yes")
    assert done.exit_code == 0 and "removed 1 entries" in done.stdout and not path.exists()
