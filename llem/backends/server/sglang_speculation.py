"""Speculative decoding on a launched SGLang server: the ``speculative`` group as SGLang's launch
flags, and why its ``/metrics`` cannot fill the result's ``speculative`` section.

Read in SGLang's sources on its main branch of 2026 (0.5.x): ``python/sglang/srt/server_args.py``
(the flags and their rules), ``docs/advanced_features/speculative_decoding.md`` and
``python/sglang/srt/metrics/collector.py`` with the scheduler's decode log (what it exports).

- ``speculative=ngram``: ``--speculative-algorithm NGRAM``. SGLang looks the text's last tokens up
  in an n-gram cache of the prompts and outputs it has seen (all requests', not just this one's)
  and verifies a tree of ``--speculative-num-draft-tokens`` nodes whose root is the last verified
  token; llem asks for a chain (``--speculative-ngram-max-bfs-breadth 1``) of ``num_tokens``
  proposals, so ``num_tokens + 1`` draft tokens (its n-gram trie returns that many per request,
  the root first: ``cpp_ngram/trie_cache.cpp``). ``speculative.ngram_size`` is refused: the
  flag nearest to it changed meaning across SGLang releases
  (``--speculative-ngram-max-match-window-size``, which had to stay below the stored branch
  length, 18; then ``--speculative-ngram-max-trie-depth``, which bounds the stored continuations
  too), so SGLang's own default stands. SGLang runs NGRAM on CUDA only.
- ``speculative=draft``: ``--speculative-algorithm STANDALONE`` with the draft model
  (``--speculative-draft-model-path``), ``num_tokens`` draft steps of one token each
  (``--speculative-num-steps``, ``--speculative-eagle-topk 1``) and ``num_tokens + 1`` draft tokens
  (SGLang sets that itself for top-k 1).

What speculation did: SGLang counts no draft or accepted tokens in ``/metrics``. Its scheduler
sums them between two decode logs (every ``--decode-log-interval`` decode batches, 40 by default)
and then sets two gauges, ``sglang:spec_accept_length`` (tokens per verification step, the target's
own included) and ``sglang:spec_accept_rate`` (accepted over proposed), to the means of those
batches alone. A gauge read at the window's end is the last interval's mean: it may cover steps
before the window (warm-up, another client's requests) and misses the window's earlier steps. So
llem publishes no speculative figure for SGLang; the section is null, its reason naming what the
gauges said and their scope.
"""

from __future__ import annotations

from typing import Any

from llem.backends.server.metrics import ServerMetrics
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod

#: ``--speculative-algorithm`` for each method
ALGORITHMS = {SpeculativeMethod.ngram: "NGRAM", SpeculativeMethod.draft: "STANDALONE"}
#: every SGLang server argument that sets its speculation starts with this (``server.args``)
FLAG_PREFIX = "speculative_"


def launch_args(spec: SpeculativeConfig, draft: str | None) -> dict[str, Any]:
    """The SGLang preset's arguments for ``spec`` (none for speculative=none); ``draft`` is the
    draft model as the server loads it."""
    if spec.method == SpeculativeMethod.none:
        return {}
    args: dict[str, Any] = {"speculative_algorithm": ALGORITHMS[spec.method]}
    if spec.method == SpeculativeMethod.ngram:
        args["speculative_num_draft_tokens"] = spec.num_tokens + 1
        args["speculative_ngram_max_bfs_breadth"] = 1
        return args
    args["speculative_draft_model_path"] = draft or spec.draft_model
    args["speculative_num_steps"] = spec.num_tokens
    args["speculative_eagle_topk"] = 1
    args["speculative_num_draft_tokens"] = spec.num_tokens + 1
    return args


def conflicting_args(server_args: dict[str, Any]) -> list[str]:
    """The ``server.args`` keys that set SGLang's speculation themselves."""
    return sorted(k for k in server_args if k.startswith(FLAG_PREFIX))


def method_refusal(spec: SpeculativeConfig, device: str | None) -> str | None:
    """The line refusing what SGLang's speculation cannot do as asked: NGRAM off CUDA, or an
    n-gram size (None where it can)."""
    if spec.method != SpeculativeMethod.ngram:
        return None
    if device == "cpu":
        return (
            "speculative=ngram: server.launch=sglang runs NGRAM speculation on CUDA only, and "
            "device=cpu (it can: speculative=draft, or speculative=none)"
        )
    if spec.ngram_size is not None:
        return (
            f"speculative.ngram_size={spec.ngram_size}: server.launch=sglang's NGRAM takes no "
            "n-gram size (its nearest flag changed meaning across SGLang releases; it can: "
            "speculative=ngram with speculative.ngram_size unset)"
        )
    return None


def _gauge(value: float | None, name: str) -> str:
    if value is None:
        return f"{name} absent"
    if value == 0:
        return f"{name} 0 (no decode log interval had ended)"
    return f"{name} {value:.3g}"


def null_reason(method: SpeculativeMethod, metrics: ServerMetrics) -> str:
    """The ``speculative`` section's null reason on an SGLang server: what its gauges said at the
    window's last poll, and why that is not the window's figure."""
    last = metrics.samples[-1] if metrics.samples else None
    said = (
        f"its /metrics was not read: {metrics.reason or 'no sample'}"
        if last is None
        else (
            "at the window's last poll "
            f"{_gauge(last.spec_accept_length, 'sglang:spec_accept_length')} tokens per "
            f"verification step, {_gauge(last.spec_accept_rate, 'sglang:spec_accept_rate')}"
        )
    )
    return (
        f"speculative={method.value}: SGLang's /metrics counts no draft or accepted tokens; its "
        "gauges are means over its last decode log interval, not over the window "
        f"({said}; see docs/speculative.md)"
    )
