"""Finding a model: ``pkg:`` references, local directories, GGUF files, the HF cache.

Nothing here imports torch or transformers at module level, so pre-flight stays fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
from pathlib import Path

from llem.cache import llem_cache_dir
from llem.config.model import ModelConfig, Weights

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


def model_problem(m: ModelConfig) -> str | None:
    """None when ``m`` can be loaded here; otherwise one sentence saying why not. A shipped
    architecture with random weights needs nothing (``model.name_or_path`` is not used); random
    weights from ``model.name_or_path`` need its config.json only."""
    if m.weights == Weights.random and m.architecture is not None:
        return None
    return model_access_problem(m.name_or_path, m.gguf_file, m.revision)


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


HUB_TIMEOUT_S = 5.0  # how long pre-flight waits for the hub's answer about a model not cached


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment now, as huggingface_hub reads it
    at import: ``HF_HUB_CACHE`` (or the older ``HUGGINGFACE_HUB_CACHE``), else ``HF_HOME/hub``,
    else ``$XDG_CACHE_HOME/huggingface/hub`` (``~/.cache`` without it)."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    home = os.environ.get("HF_HOME") or Path(xdg) / "huggingface"
    return Path(home).expanduser() / "hub"


def _hub_problem(name_or_path: str, gguf_file: str | None, revision: str | None) -> str | None:
    """A hub id: in the local HF cache, it loads. Not in it: offline (``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE``), a problem at once; online, a problem unless the hub answers within
    ``HUB_TIMEOUT_S`` (one request, no retries) that the model exists, which from_pretrained then
    downloads."""
    looks_like_id = name_or_path.count("/") <= 1 and not name_or_path.startswith((".", "/", "~"))
    if not looks_like_id:
        return f"model.name_or_path={name_or_path}: no such local directory"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(
            name_or_path,
            gguf_file or "config.json",
            cache_dir=hub_cache_dir(),
            revision=revision or None,
        )
    except Exception as exc:  # invalid repo ids raise here
        return f"model.name_or_path={name_or_path}: {exc}"
    if isinstance(cached, str):
        return None
    missing = (
        f"model.name_or_path={name_or_path} is not in the local Hugging Face cache "
        f"({hub_cache_dir()})"
    )
    if _offline():
        return (
            f"{missing} and HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set: is it downloaded? "
            f"(hf download {name_or_path}, where there is network), or point "
            "model.name_or_path at a local directory"
        )
    answer = ask_hub(name_or_path, gguf_file, revision)
    return f"{missing} and {answer}" if answer else None


def ask_hub(name_or_path: str, gguf_file: str | None, revision: str | None) -> str | None:
    """None when the hub says the model (and its GGUF file) is there to download; otherwise why
    it cannot be downloaded now, as the end of a sentence with the hint. Asked once per process
    (the points of a sweep share the answer)."""
    key = (os.environ.get("HF_ENDPOINT") or "", name_or_path, gguf_file, revision)
    if key not in _HUB_ANSWERS:
        _HUB_ANSWERS[key] = _ask_hub(name_or_path, gguf_file, revision)
    return _HUB_ANSWERS[key]


_HUB_ANSWERS: dict[tuple[str, str, str | None, str | None], str | None] = {}


def _ask_hub(name_or_path: str, gguf_file: str | None, revision: str | None) -> str | None:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
    try:
        info = api.model_info(name_or_path, revision=revision or None, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        return "the hub says it is gated: request access on its page, then log in (hf auth login)"
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
        return f"the hub has no such model ({type(exc).__name__}): check the id and revision"
    except HfHubHTTPError as exc:
        return f"the hub refused it ({str(exc).splitlines()[0]})"
    except Exception as exc:  # no network, DNS, a timeout: one try, no retries
        return (
            f"the hub could not be reached ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no answer'}; one try of at most "
            f"{HUB_TIMEOUT_S:g} s): is it downloaded? "
            f"(hf download {name_or_path}, where there is network); set HF_HUB_OFFLINE=1 to use "
            "the cache only"
        )
    files = {s.rfilename for s in info.siblings or []}
    if gguf_file and files and gguf_file not in files:
        return f"the hub's copy has no {gguf_file} (model.gguf_file)"
    return None


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
