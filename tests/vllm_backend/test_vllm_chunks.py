"""Prefill chunks and preemption recomputes land in the steps that computed them (no engine: the
step sequences are what vLLM 0.32's scheduler does with a 512-token budget, written by hand)."""

from __future__ import annotations

from llem.backends.vllm.chunks import SeenStep, place
from llem.backends.vllm.steps import OfflineSteps
from llem.vocabulary.workload import StepShare


def chunked_run() -> OfflineSteps:
    """Request 0 (200-token prompt) is admitted alone and decodes; request 1 (4000 tokens)
    arrives and is prefilled in chunks of what the 512-token budget leaves beside 0's decode
    (511 a step: 7 full chunks and a last one of 423), then both decode."""
    log = OfflineSteps(0.0)
    log.step(1.0, [(0, 1)], (200, 0))  # 0's prefill and first token
    for k in range(7):
        log.step(2.0 + k, [(0, 1)], (511, 1))  # a chunk of 1, 0 decodes
    log.step(9.0, [(0, 1), (1, 1)], (423, 1))  # 1's last chunk and first token
    log.step(10.0, [(0, 1), (1, 1)], (0, 2))
    return log


def test_each_prefill_chunk_is_in_the_step_that_computed_it() -> None:
    steps, placed = chunked_run().engine_steps([200, 4000], [200, 4000])
    shares = [s.shares for s in steps]
    assert shares[0] == (StepShare(0, 200, 1),)
    for k in range(1, 8):
        assert shares[k] == (StepShare(1, 511, 0), StepShare(0, 0, 1))
    assert shares[8] == (StepShare(1, 423, 1), StepShare(0, 0, 1))
    assert shares[9] == (StepShare(0, 0, 1), StepShare(1, 0, 1))
    assert sum(x.prefill_tokens for s in steps for x in s.shares or () if x.request_id == 1) == 4000
    assert [s.prefill_tokens for s in steps] == [200, *[511] * 7, 423, 0]
    assert "placed in the steps that computed them" in placed.note and placed.unplaced is None


def test_a_preempted_requests_recompute_lands_where_it_was_recomputed() -> None:
    """Request 1 (prompt 300) decodes 2 tokens, is preempted while 0 decodes, and is recomputed
    (302 tokens: its prompt and its 2 outputs) in two steps before it speaks again."""
    recs = [
        SeenStep(((0, 1), (1, 1)), 400, 0),  # both prefill (100 + 300), first tokens
        SeenStep(((0, 1), (1, 1)), 0, 2),
        SeenStep(((0, 1),), 0, 1),  # 1 preempted
        SeenStep(((0, 1),), 0, 1 + 200),  # 200 of 1's recompute beside 0's decode
        SeenStep(((0, 1), (1, 1)), 0, 1 + 102),  # the last 102, and 1 speaks again
    ]
    placed = place(recs, {0: 100, 1: 300}, {0: 100, 1: 300})
    assert placed.unplaced is None
    assert placed.shares[3] == (StepShare(1, 200, 0), StepShare(0, 0, 1))
    assert placed.shares[4] == (StepShare(1, 102, 1), StepShare(0, 0, 1))


def test_without_the_schedulers_totals_the_prefill_is_spread_and_the_reason_given() -> None:
    recs = [SeenStep(((0, 1),)), SeenStep(((0, 1),)), SeenStep(((0, 1), (1, 1)))]
    placed = place(recs, {0: 10, 1: 7}, {0: 10, 1: 7}, {1: 1})
    assert placed.unplaced == "vLLM reported no per-step scheduled token totals"
    assert [s for s in placed.shares[1] if s.request_id == 1] == [StepShare(1, 4, 0)]
    assert [s for s in placed.shares[2] if s.request_id == 1] == [StepShare(1, 3, 1)]
    assert "spread evenly" in placed.note


def test_totals_that_do_not_add_up_are_not_forced_onto_requests() -> None:
    """A step whose prompt tokens no pending request can take (e.g. a prefix-cache miss llem did
    not know of) falls back to the spread, with the step named."""
    recs = [SeenStep(((0, 1),), 150, 0), SeenStep(((0, 1),), 0, 1)]
    placed = place(recs, {0: 100}, {0: 100})
    assert placed.unplaced is not None and "step 0" in placed.unplaced
    assert placed.shares[0] == (StepShare(0, 100, 1),)


def test_the_serving_log_places_chunks_of_steps_that_delivered_no_outputs() -> None:
    """The serving engine's stat logger: a step of prefill chunks only comes with no iteration
    stats (vLLM's AsyncLLM makes them only for steps with outputs); it is still a step, and the
    chunk is its request's share there."""
    from types import SimpleNamespace as NS

    from llem.backends.vllm.steps import StepLog, with_shares

    def stats(ctx: int, gen: int) -> NS:
        d = NS(
            num_ctx_requests=1,
            num_generation_requests=0,
            num_ctx_tokens=ctx,
            num_generation_tokens=gen,
            elapsed_ms=1.0,
            is_dummy=False,
        )
        return NS(iteration_details=d)

    log = StepLog()
    for ctx in (64, 64):  # chunks only: no outputs, no iteration stats
        log.record(stats(ctx, 0), None)
    it = NS(num_generation_tokens=1, num_prompt_tokens=0, finished_requests=[])
    log.outputs(it, [NS(request_id="llem-serve-1-0-abc", new_token_ids=[7])])
    log.record(stats(32, 0), it)  # last chunk and first token
    steps, placed = with_shares(log.steps, {"llem-serve-1-0": 0}, {0: 160}, {0: 160})
    assert [s.shares for s in steps] == [
        (StepShare(0, 64, 0),),
        (StepShare(0, 64, 0),),
        (StepShare(0, 32, 1),),
    ]
    assert placed is not None and "placed in the steps that computed them" in placed.note


def test_asynchronous_scheduling_counts_and_overshoots_are_taken_as_they_come() -> None:
    """With asynchronous scheduling (vLLM's default where the executor supports it) a request's
    first decode is scheduled before its first token is known, so the scheduler counts it as a
    prompt token; and a request that just finished may get one more token scheduled."""
    recs = [
        SeenStep(((0, 1),), 100, 0),  # 0's prefill and first token
        SeenStep(((0, 1), (1, 1)), 1 + 50, 0),  # 0's decode counted as prompt; 1's prefill
        SeenStep(((1, 1),), 1, 1),  # 0 ended last step: one token overshoot; 1 decodes
        SeenStep(((1, 1),), 0, 1),
    ]
    placed = place(recs, {0: 100, 1: 50}, {0: 100, 1: 50})
    assert placed.unplaced is None
    assert placed.shares[1] == (StepShare(1, 50, 1), StepShare(0, 0, 1))
    assert placed.shares[2] == (StepShare(1, 0, 1),)
