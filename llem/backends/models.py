"""Finding a model: ``pkg:`` references, local directories, GGUF files, the HF cache.

Nothing here imports torch or transformers at module level, so pre-flight stays fast.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

PKG_PREFIX = "pkg:"


def resolve_name_or_path(name_or_path: str) -> tuple[str, bool]:
    """Return ``(what from_pretrained receives, is_local)``.

    ``pkg:<package>`` names a model shipped inside an installed Python package: it resolves to the
    package directory, found without importing the package (its own imports may be unavailable).
    """
    if name_or_path.startswith(PKG_PREFIX):
        package = name_or_path[len(PKG_PREFIX) :]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                f"model.name_or_path={name_or_path}: Python package '{package}' is not installed"
            )
        return str(next(iter(spec.submodule_search_locations))), True
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path.resolve()), True
    return name_or_path, False


def _offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def model_access_problem(
    name_or_path: str, gguf_file: str | None, revision: str | None
) -> str | None:
    """None when the model can be loaded here; otherwise one sentence saying why not."""
    try:
        resolved, is_local = resolve_name_or_path(name_or_path)
    except FileNotFoundError as exc:
        return str(exc)
    if is_local:
        return _local_problem(Path(resolved), name_or_path, gguf_file)
    return _hub_problem(name_or_path, gguf_file, revision)


def _local_problem(root: Path, name_or_path: str, gguf_file: str | None) -> str | None:
    if gguf_file:
        found = ", ".join(sorted(p.name for p in root.glob("*.gguf")))
        if not (root / gguf_file).is_file():
            return (
                f"model.gguf_file={gguf_file}: not found in {root} "
                f"(GGUF files there: {found or 'none'})"
            )
        return None
    if root.is_file():
        return (
            f"model.name_or_path={name_or_path} is a file; for a GGUF file set "
            "model.name_or_path=<its directory> model.gguf_file=<file name>"
        )
    if not (root / "config.json").is_file():
        return f"model.name_or_path={name_or_path}: directory has no config.json"
    return None


def _hub_problem(name_or_path: str, gguf_file: str | None, revision: str | None) -> str | None:
    """A hub id: is it in the local HF cache (it must be when offline)?"""
    looks_like_id = name_or_path.count("/") <= 1 and not name_or_path.startswith((".", "/", "~"))
    if not looks_like_id:
        return f"model.name_or_path={name_or_path}: no such local directory"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(
            name_or_path, gguf_file or "config.json", revision=revision or None
        )
    except Exception as exc:  # invalid repo ids raise here
        return f"model.name_or_path={name_or_path}: {exc}"
    if isinstance(cached, str):
        return None
    if _offline():
        return (
            f"model.name_or_path={name_or_path} is not in the local Hugging Face cache and "
            "HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set (download it first, or point "
            "model.name_or_path at a local directory)"
        )
    return None  # online: from_pretrained will download it


def gguf_cache_dir(gguf_path: Path, transformers_version: str) -> Path:
    """Where the dequantised copy of a GGUF checkpoint is kept between runs.

    The key covers the file's identity (path, size, mtime) and the transformers version that
    converted it, so a changed file or a new converter never reuses a stale copy.
    ``LLEM_CACHE_DIR`` overrides the root (default ``~/.cache/llem``).
    """
    st = gguf_path.stat()
    key = f"{gguf_path.resolve()}|{st.st_size}|{int(st.st_mtime)}|{transformers_version}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    root = Path(os.environ.get("LLEM_CACHE_DIR", Path.home() / ".cache" / "llem"))
    return root / "gguf" / f"{gguf_path.stem}-{digest}"


def convert_gguf(root: Path, gguf_file: str, trust_remote_code: bool) -> Path:
    """Dequantise a GGUF checkpoint once and keep the result, so later loads are fast."""
    import gc
    import json
    import shutil

    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = gguf_cache_dir(root / gguf_file, transformers.__version__)
    if (target / "config.json").is_file() and (target / "tokenizer_config.json").is_file():
        return target
    log.info("converting %s once; the converted copy is kept in %s", gguf_file, target)
    trust = trust_remote_code
    model = AutoModelForCausalLM.from_pretrained(
        str(root), gguf_file=gguf_file, trust_remote_code=trust
    )
    tok = AutoTokenizer.from_pretrained(str(root), gguf_file=gguf_file, trust_remote_code=trust)
    # The GGUF weights are already dequantised into ordinary tensors; drop the GGUF quantizer
    # marker so the model saves as a plain checkpoint.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "llem_source.json").write_text(
        json.dumps({"gguf": str(root / gguf_file), "transformers": transformers.__version__})
    )
    del model
    gc.collect()
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target
