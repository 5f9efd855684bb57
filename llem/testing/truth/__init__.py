"""An independent truth for llem's energy attribution (tests and bench only).

Three parts, none of which calls the code under test (``llem.figures.attribution``,
``llem.figures.energy_fit``, ``llem.measure.span_energy``):

* ``engine``: a continuous-batching scheduler with a token budget per step, chunked prefill and
  preemption with recompute when the KV cache runs out, reporting ``EngineStep``s with each
  request's ``StepShare`` as an engine would (each prefill chunk in the step that computed it);
* ``gpu``: the physics: each step's duration and power from its shape (compute-bound prefill with
  a saturating draw, memory-bound decode whose draw grows sub-linearly with the batch, static
  power while busy, idle power between steps), and each request's part of each step's energy by
  the physics' own definition (``gpu`` docstring); a ``LinearGpu`` plants the fitted model exactly;
* ``sensor``: what NVML shows of that power: readings refreshed every 100 ms, each the mean of
  only part of its window (A100/H100 sample ~25 ms of each 100 ms, arXiv 2312.02741), the energy
  counter summing those readings, ``nvmlDeviceGetPowerUsage`` their trailing 1 s mean;
* ``harness``: a whole run: schedule, physics, sensor, llem's real measurement session on a
  virtual clock, and the truth per phase and per request, from the physics alone, over the
  window or any part of it (``Run.truth_between``: a steady state's), with the output tokens
  sampled there (``Truth.j_per_output_token``: a steady state's or a search objective's truth).
* ``draft``: speculative decoding's draft phase: drafts and verifications of planted powers and
  lengths (``k`` varying between requests), read the same way, with the truth of each phase's
  energy (the draft's energy against the verification's, ``llem.figures.draft_energy``).
"""
