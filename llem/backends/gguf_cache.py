"""The converted copies of GGUF checkpoints, kept between runs: a GGUF file is dequantised into an
ordinary transformers checkpoint once per content and transformers version (``convert_gguf``),
under ``<LLEM_CACHE_DIR>/gguf``, and that copy is found again (``find_converted``) wherever the
same file is installed, copied or renamed, and under the older, path-based names.

Nothing here imports torch or transformers at module level, so pre-flight stays fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from pathlib import Path

from llem.cache import llem_cache_dir

log = logging.getLogger(__name__)


GGUF_HEAD_BYTES = 1 << 20  # the header (metadata, tensor names, shapes, types) and the end
GGUF_SLICES = 32  # slices of the tensor data between them
GGUF_SLICE_BYTES = 1 << 16


def gguf_identity(gguf_path: Path) -> str:
    """The GGUF file's content identity: a SHA-256 of its size, its first and last MiB and 32
    slices of 64 KiB spread over the rest (about 4 MiB read, whatever the file's size).

    The same file installed again (a new virtual environment, a new mtime), copied elsewhere or
    renamed has the same identity; another model or quantisation differs in size, header or
    tensor data.
    """
    size = gguf_path.stat().st_size
    spans = [(0, GGUF_HEAD_BYTES), (max(size - GGUF_HEAD_BYTES, 0), GGUF_HEAD_BYTES)]
    spans += [(size * k // (GGUF_SLICES + 1), GGUF_SLICE_BYTES) for k in range(1, GGUF_SLICES + 1)]
    digest = hashlib.sha256(f"gguf|{size}".encode())
    with open(gguf_path, "rb") as fh:
        for offset, n in spans:
            fh.seek(offset)
            digest.update(fh.read(n))
    return digest.hexdigest()


def _cache_root() -> Path:
    return llem_cache_dir() / "gguf"


def gguf_cache_dir(gguf_path: Path, transformers_version: str) -> Path:
    """Where the dequantised copy of a GGUF checkpoint is kept between runs:
    ``<LLEM_CACHE_DIR, default ~/.cache/llem>/gguf/<file stem>-<key>``.

    The key covers the file's content (``gguf_identity``), not its path or mtime, so a fresh
    install of the same model finds the copy, and the transformers version that converted it,
    so a new converter never reuses a stale copy. ``find_converted`` also finds a copy made
    under another file name or under the older, path-based naming.
    """
    key = f"{gguf_identity(gguf_path)}|{transformers_version}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return _cache_root() / f"{gguf_path.stem}-{digest}"


def _complete(copy: Path) -> bool:
    return (copy / "config.json").is_file() and (copy / "tokenizer_config.json").is_file()


def find_converted(gguf_path: Path, transformers_version: str) -> Path | None:
    """An existing converted copy of this GGUF file (same content, same transformers), or None.

    Looked for under its own key, then under the same key with another file name, then among
    copies named the older way (path, size, mtime): such a copy is used only when the file it
    records still exists, is unchanged since (its name still matches) and has the same content.
    A copy found under another name gets ``gguf_cache_dir``'s name as a link to it, so the next
    look is direct.
    """
    target = gguf_cache_dir(gguf_path, transformers_version)
    if _complete(target):
        return target
    digest = target.name.rsplit("-", 1)[1]
    named = [d for d in sorted(target.parent.glob(f"*-{digest}")) if _complete(d)]
    found = named[0] if named else None
    if found is None:
        found = _older_copy(target.parent, gguf_identity(gguf_path), transformers_version)
    if found is not None:
        log.info("using the converted copy %s (made from the same GGUF file)", found)
        with contextlib.suppress(OSError):
            if target.is_symlink():
                target.unlink()
            target.symlink_to(found, target_is_directory=True)
    return found


def _older_name(gguf_path: Path, transformers_version: str) -> str | None:
    """The directory name llem gave a copy of ``gguf_path`` before copies were keyed by content
    (its resolved path, size, mtime and the transformers version); None when the file is gone."""
    try:
        st = gguf_path.stat()
        key = f"{gguf_path.resolve()}|{st.st_size}|{int(st.st_mtime)}|{transformers_version}"
    except OSError:
        return None
    return f"{gguf_path.stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _older_copy(root: Path, identity: str, transformers_version: str) -> Path | None:
    """A copy named the older way whose source file is this file's content, unchanged since."""
    import json

    for copy in sorted(root.glob("*")) if root.is_dir() else []:
        try:
            source = json.loads((copy / "llem_source.json").read_text(encoding="utf-8"))
            origin = Path(source["gguf"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if "identity" in source or source.get("transformers") != transformers_version:
            continue  # a copy keyed by content is found by its name; another converter
        if copy.name != _older_name(origin, transformers_version) or not _complete(copy):
            continue  # its source is gone or changed since: nothing proves what it holds
        with contextlib.suppress(OSError):
            if gguf_identity(origin) == identity:
                return copy
    return None


def convert_gguf(root: Path, gguf_file: str, trust_remote_code: bool) -> Path:
    """Dequantise a GGUF checkpoint once and keep the result, so later loads are fast; a copy
    of the same file made earlier (``find_converted``) is used instead of converting again."""
    import transformers

    found = find_converted(root / gguf_file, transformers.__version__)
    if found is not None:
        return found
    return _convert(root, gguf_file, trust_remote_code)


def _convert(root: Path, gguf_file: str, trust_remote_code: bool) -> Path:
    import gc
    import json
    import shutil

    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = root / gguf_file
    target = gguf_cache_dir(gguf_path, transformers.__version__)
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
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    source = {
        "gguf": str(gguf_path),
        "size": gguf_path.stat().st_size,
        "identity": gguf_identity(gguf_path),
        "transformers": transformers.__version__,
    }
    (tmp / "llem_source.json").write_text(json.dumps(source))
    del model
    gc.collect()
    # Another process (a second llem, a sweep's other worker) may have put its copy in place
    # meanwhile, and may be loading it: keep that one, never remove it under its reader.
    done = find_converted(gguf_path, transformers.__version__)
    if done is not None:
        shutil.rmtree(tmp, ignore_errors=True)
        return done
    if target.is_symlink():  # a link to an older copy that has gone since
        target.unlink()
    shutil.rmtree(target, ignore_errors=True)
    try:
        tmp.rename(target)
    except OSError:  # put in place by another process between the check and the rename
        shutil.rmtree(tmp, ignore_errors=True)
        done = find_converted(gguf_path, transformers.__version__)
        if done is None:
            raise
        return done
    return target
