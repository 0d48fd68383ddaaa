"""The model a classifier's card names, as the user grants it: what would reach the network only with the user's
confirmation, the API key only from a variable the user names, and the user's settings of a model run here applied
where they mean something and refused where not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from docaudit.config import ModelConfig
from docaudit.errors import DocauditError

CARD_NETWORK_FIELDS = ("api_base", "api_model", "api_key_env", "api_tokenizer", "api_timeout", "api_retries")


def card_model(
    card: dict, trust_remote_code: bool = False, use_card_backend: bool = False, user: dict | None = None
) -> ModelConfig:
    """The model a classifier was trained for, as its card names it. ``trust_remote_code`` comes from the caller
    (the user's own flag), never from the card. A local model that is not where the card says is an error here,
    never a hub request.

    What would reach the network is the user's to decide: a card naming an OpenAI-compatible server (its URL,
    model, tokenizer, key variable, timeout and retries) or a hub model is used only with ``use_card_backend``
    (the user's confirmation), otherwise a one-line error says what the card asks for and which options grant it.
    Even then the API key is read only from the environment variable the user names (``user["api_key_env"]``),
    never from one the card names; the user's other settings in ``user`` (ModelConfig fields) replace the card's.
    The user's ``device``, ``dtype``, ``quantize`` and ``revision`` (``RUN_HERE_FIELDS``) apply where they mean
    something and are refused where not (:func:`_run_here`), never dropped."""
    user = dict(user or {})
    run_here = {k: user.pop(k) for k in RUN_HERE_FIELDS if user.get(k) is not None}
    config = replace(ModelConfig(**card["model_config"]), trust_remote_code=trust_remote_code)
    config = _run_here(config, card["model_identity"], run_here)
    asks = _network_request(config, card["model_identity"])
    if asks is not None:
        if not use_card_backend:
            raise DocauditError(
                f"this classifier's card asks to {asks}; docaudit contacts no server the user did not name: pass "
                f"{_granting_options(config)} to do so yourself, or --use-card-backend to accept the card's settings"
            )
        if config.backend == "openai":
            if config.api_key_env and not user.get("api_key_env"):
                raise DocauditError(
                    f"this classifier's card reads the API key from the environment variable {config.api_key_env}, "
                    "which docaudit reads only when the user names it: pass --api-key-env with the variable that "
                    "holds the key"
                )
            config = replace(config, **{"api_key_env": None, **user})
        return config
    if config.model is not None and not card["model_identity"].startswith("hub:"):
        where = Path(config.model)
        if not where.is_absolute():
            raise DocauditError(
                f"this classifier's card names its model by the relative path '{config.model}', "
                "which cannot be found from here: pass --model with that model (a copy is accepted)"
            )
        if not where.exists():
            raise DocauditError(
                f"the model this classifier was trained for is no longer at {config.model}: pass "
                "--model with that model (a copy is accepted)"
            )
    return config


RUN_HERE_FIELDS = ("device", "dtype", "quantize", "revision")  # a model run in this process: where, how, which


def _run_here(config: ModelConfig, identity: str, chosen: dict) -> ModelConfig:
    """The card's model with the user's ``chosen`` settings of a model run here: ``device``, ``dtype`` and
    ``quantize`` for a model run by transformers in this process (not for llama.cpp: it runs the .gguf on the CPU
    at the file's own quantization), ``revision`` for a hub model; anything else is refused with the reason."""
    if not chosen:
        return config
    flags = ", ".join(f"--{k}" for k in chosen)
    if config.backend == "openai":
        raise DocauditError(
            f"{flags}: this classifier's model runs on a server ({config.api_base or config.model}), not here; "
            "name a model with --model to run it here"
        )
    if "revision" in chosen and not identity.startswith("hub:"):
        where = f"the local {config.model}" if config.model else "the embedded one"
        raise DocauditError(
            f"--revision: this classifier's model is {where}, not a hub model; a revision names a hub model's version"
        )
    if config.backend == "llamacpp" and (ignored := [k for k in ("device", "dtype", "quantize") if k in chosen]):
        raise DocauditError(
            f"{', '.join(f'--{k}' for k in ignored)}: this classifier's model runs through llama.cpp, on the CPU at "
            "the .gguf's own quantization; name the model with --model to run it through transformers instead"
        )
    return replace(config, **chosen)


def _network_request(config: ModelConfig, identity: str) -> str | None:
    """What a card's model settings would send over the network, in words, or None when nothing."""
    if config.backend == "openai":
        server = config.api_base or config.model or "(no URL)"
        parts = [f"model {config.api_model}" if config.api_model else "", f"tokenizer {config.api_tokenizer}"]
        if config.api_key_env:
            parts.append(f"the key in the environment variable {config.api_key_env}")
        parts.append(f"{config.api_timeout:g} s per request, {config.api_retries} retries")
        return f"send the documents to the server {server} ({', '.join(p for p in parts if p)})"
    if config.model is not None and identity.startswith("hub:"):
        return f"load the model {config.model} from the Hugging Face hub (revision {config.revision or 'main'})"
    return None


def _granting_options(config: ModelConfig) -> str:
    """The command-line options with which the user names what a card asks for."""
    if config.backend == "openai":
        key = f" --api-key-env {config.api_key_env}" if config.api_key_env else ""
        return f"--backend openai --api-base {config.api_base or config.model} --api-tokenizer TOKENIZER{key}"
    return f"--model {config.model}" + (f" --revision {config.revision}" if config.revision else "")


def classifier_auc(card: dict) -> tuple[float, float, float]:
    """A classifier's quality figure (``audit.meta.QUALITY``), read from its card before any model loads: its pooled
    out-of-fold AUC and 95% interval."""
    auc = card["pooled_bootstrap_95"]["auc"]
    return auc["point"], auc["ci_low"], auc["ci_high"]
