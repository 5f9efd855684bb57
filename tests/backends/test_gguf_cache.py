"""A GGUF checkpoint is converted once per content, wherever the file is installed."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from llem.backends import gguf_cache
from llem.backends.gguf_cache import convert_gguf, find_converted, gguf_cache_dir

# These tests make and read the cache themselves: none of it is shared with other tests.
pytestmark = pytest.mark.own_llem_cache

TINY_GGUF = "tiny.gguf"


def build_tiny_gguf(directory: Path) -> Path:
    """``llem.testing.tinymodel``'s tokenizer and random Llama written as an F32 GGUF file (the
    tensor names llama.cpp gives a Llama), which transformers dequantises like any GGUF."""
    import gguf

    from llem.testing.tinymodel import tiny_llama, tiny_tokenizer

    directory.mkdir(parents=True, exist_ok=True)
    tok = tiny_tokenizer()
    tokens = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    model = tiny_llama(len(tokens))
    c = model.config
    w = gguf.GGUFWriter(str(directory / TINY_GGUF), "llama")
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3 if t.startswith("<") and t.endswith(">") else 1 for t in tokens])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_bos_token_id(tok.bos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_pad_token_id(tok.pad_token_id)
    for key, tensor in model.state_dict().items():
        w.add_tensor(_gguf_name(key), tensor.detach().float().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return directory


_LAYER = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
_TOP = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def _gguf_name(key: str) -> str:
    if key in _TOP:
        return _TOP[key]
    _, _, layer, rest = key.split(".", 3)  # model.layers.<i>.<part>.weight
    part, _, suffix = rest.rpartition(".")
    return f"blk.{layer}.{_LAYER[part]}.{suffix}"


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("tiny-gguf"))


def _install_again(source: Path, where: Path, name: str = TINY_GGUF) -> Path:
    """The same file in another directory with a newer mtime: what a fresh venv's pip install
    of the model package gives."""
    where.mkdir(parents=True)
    shutil.copyfile(source / TINY_GGUF, where / name)
    st = (where / name).stat()
    os.utime(where / name, (st.st_atime + 3600, st.st_mtime + 3600))
    return where


def _conversions(caplog: pytest.LogCaptureFixture) -> int:
    return sum("converting" in r.getMessage() for r in caplog.records)


def test_a_fresh_install_of_the_same_gguf_file_is_not_converted_again(
    tiny_gguf: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="llem.backends.gguf_cache")
    first = convert_gguf(tiny_gguf, TINY_GGUF, trust_remote_code=False)
    assert _conversions(caplog) == 1
    again = _install_again(tiny_gguf, tmp_path / "venv2")
    assert convert_gguf(again, TINY_GGUF, trust_remote_code=False) == first
    renamed = _install_again(tiny_gguf, tmp_path / "venv3", "renamed.gguf")
    assert convert_gguf(renamed, "renamed.gguf", trust_remote_code=False) == first
    assert _conversions(caplog) == 1
    import transformers

    linked = gguf_cache_dir(renamed / "renamed.gguf", transformers.__version__)
    assert linked.resolve() == first.resolve()  # found directly next time
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(str(first)).config.hidden_size == 32


def test_another_gguf_file_of_the_same_size_is_converted_on_its_own(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    import transformers

    other = _install_again(tiny_gguf, tmp_path / "other")
    data = bytearray((other / TINY_GGUF).read_bytes())
    data[-10] ^= 0xFF  # one byte of the last tensor
    (other / TINY_GGUF).write_bytes(bytes(data))
    version = transformers.__version__
    assert gguf_cache_dir(other / TINY_GGUF, version) != gguf_cache_dir(
        tiny_gguf / TINY_GGUF, version
    )


def _older_copy(gguf_path: Path, version: str) -> Path:
    """A converted copy as earlier llem versions named it (path, size, mtime), with its record."""
    name = gguf_cache._older_name(gguf_path, version)
    assert name is not None
    copy = Path(os.environ["LLEM_CACHE_DIR"]) / "gguf" / name
    copy.mkdir(parents=True)
    for f in ("config.json", "tokenizer_config.json"):
        (copy / f).write_text("{}")
    record = {"gguf": str(gguf_path), "transformers": version}
    (copy / "llem_source.json").write_text(json.dumps(record))
    return copy


def test_a_copy_under_the_older_naming_is_found_while_its_source_proves_its_content(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    import transformers

    version = transformers.__version__
    earlier = _install_again(tiny_gguf, tmp_path / "earlier-venv")
    old = _older_copy(earlier / TINY_GGUF, version)
    fresh = _install_again(tiny_gguf, tmp_path / "fresh-venv")
    assert find_converted(fresh / TINY_GGUF, version) == old
    # now linked under its content key: found directly next time
    assert gguf_cache_dir(fresh / TINY_GGUF, version).resolve() == old.resolve()


def test_a_copy_under_the_older_naming_whose_source_is_gone_is_not_trusted(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    import transformers

    version = transformers.__version__
    earlier = _install_again(tiny_gguf, tmp_path / "earlier-venv")
    _older_copy(earlier / TINY_GGUF, version)
    shutil.rmtree(earlier)  # nothing left to show which file that copy was made from
    fresh = _install_again(tiny_gguf, tmp_path / "fresh-venv")
    assert find_converted(fresh / TINY_GGUF, version) is None


def test_a_copy_another_process_put_in_place_meanwhile_is_kept(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes convert the same file at once (a sweep's two workers, two llem runs): the
    one that finishes second keeps the first one's copy, which the first may be reading, and
    drops its own, instead of removing that copy and renaming its own into place."""
    first = convert_gguf(tiny_gguf, TINY_GGUF, trust_remote_code=False)
    reader = first / "being-read"  # planted: the first process's copy, open for reading
    reader.write_text("x")
    # The second process had looked before the first finished: it found no copy and converted.
    monkeypatch.setattr(gguf_cache, "find_converted", _absent_once(gguf_cache.find_converted))
    again = convert_gguf(tiny_gguf, TINY_GGUF, trust_remote_code=False)
    assert again == first and reader.read_text() == "x"
    assert not list(first.parent.glob("*.tmp"))  # its own copy is gone


def _absent_once(find: Any) -> Any:
    """``find_converted`` that finds nothing the first time it is asked."""
    asked = []

    def found(*args: Any) -> Any:
        asked.append(args)
        return None if len(asked) == 1 else find(*args)

    return found
