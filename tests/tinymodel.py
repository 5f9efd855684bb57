"""A tiny random Llama model and BPE tokenizer, built locally in seconds (no hub access).

Used by the test-suite wherever a real transformers model is needed. The weights are random, so the
text is gibberish, but shapes, padding, generation and loading all go through the real code paths.
"""

from __future__ import annotations

from pathlib import Path

_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Energy per token is measured in joules; throughput in tokens per second.",
    "Explain why the sky is blue in two sentences.",
    "Write a short poem about a lighthouse keeper who counts the waves.",
    "List three uses of a paperclip that are not holding paper together.",
    "A batch of prompts is padded on the left before generation starts.",
    "Summarise the plot of a detective story set on a night train.",
    "What is the capital of France, and why did it become the capital?",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20.",
]


def build_tiny_model(directory: Path, seed: int = 0) -> Path:
    """Write a 2-layer random LlamaForCausalLM plus its tokenizer into ``directory``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    fast.save_pretrained(directory)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(directory)
    return directory
