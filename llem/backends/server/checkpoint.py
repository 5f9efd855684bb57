"""What a launched server loads, and where the prompts' tokenizer comes from.

``model.name_or_path`` may name a model llem resolves itself: ``pkg:<package>`` (a model shipped
in a Python package, such as the default SmolLM2 GGUF file) or a GGUF file (``model.gguf_file``).
A server started by llem gets a checkpoint it can load: vLLM, SGLang and TGI llem's converted copy
of the GGUF file (the one the in-process engines load, cached), llama.cpp the GGUF file itself.
The tokenizer that builds the prompts is read from the same files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from llem.backends.gguf_cache import convert_gguf
from llem.backends.models import resolve_name_or_path
from llem.config.model import ModelConfig
from llem.config.server import command_fields
from llem.errors import RunError, first_line


def local_path(m: ModelConfig) -> str:
    """``model.name_or_path`` resolved (``pkg:`` to its directory). Raises ``RunError``."""
    try:
        path, _ = resolve_name_or_path(m.name_or_path)
    except FileNotFoundError as exc:
        raise RunError(str(exc)) from exc
    return path


def launch_checkpoint(m: ModelConfig, preset: str, template: str | None = None) -> str:
    """What ``preset``'s server loads for ``m`` (``template``: ``server.command``, whose GGUF
    model is converted only where it names ``{model}``)."""
    path = local_path(m)
    if not m.gguf_file:
        return path
    names_model = preset == "command" and "model" in command_fields(template or "")
    if preset == "llamacpp" or (preset == "command" and not names_model):
        return os.path.join(path, m.gguf_file)
    return str(convert_gguf(Path(path), m.gguf_file, m.trust_remote_code))


def tokenizer(m: ModelConfig, checkpoint: str | None) -> Any:
    """The tokenizer of ``checkpoint`` (a converted copy) or of ``m`` itself (a GGUF file's own
    tokenizer where ``model.gguf_file`` is set). Raises ``RunError``."""
    from transformers import AutoTokenizer

    source = checkpoint if checkpoint and os.path.isdir(checkpoint) else local_path(m)
    gguf = None if source == checkpoint else m.gguf_file
    try:
        kwargs: dict[str, Any] = {"trust_remote_code": m.trust_remote_code}
        if gguf:
            kwargs["gguf_file"] = gguf
        return AutoTokenizer.from_pretrained(source, **kwargs)
    except Exception as exc:
        raise RunError(
            f"model.name_or_path={m.name_or_path}: its tokenizer (which builds the prompts "
            f"sent to the server) could not be loaded: {first_line(exc)}"
        ) from exc
