"""Prometheus text format, as a server's ``/metrics`` answers it, read into one value per metric
name: the sample lines' values summed over the metric's label sets (several engines, models or
ranks), comments skipped, and an answer that is not the format a ``MetricsFormatError`` saying
which line. Reading only the names asked for leaves the rest of the text (mostly histograms)
unparsed."""

from __future__ import annotations

from llem.errors import RunError


class MetricsFormatError(RunError):
    """A /metrics answer that is not Prometheus text."""


def _name_and_rest(line: str) -> tuple[str, str]:
    """Split a sample line into its metric name and what follows its labels."""
    brace = line.find("{")
    space = line.find(" ")
    if brace == -1 or (space != -1 and space < brace):
        return line[:space], line[space:]
    quoted = escaped = False
    for i in range(brace + 1, len(line)):
        c = line[i]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            quoted = not quoted
        elif c == "}" and not quoted:
            return line[:brace], line[i + 1 :]
    raise MetricsFormatError(f"/metrics: unclosed labels in {line[:120]!r}")


def parse_prometheus(text: str, only: tuple[str, ...] | None = None) -> dict[str, float]:
    """Prometheus text format -> {metric name: value summed over its label sets}; with ``only``,
    just the lines that start with one of those names (the rest are skipped unparsed: a server's
    histograms are most of its text, and the scrape shares the requests' event loop)."""
    values: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if only is not None and not line.startswith(only):
            continue
        if " " not in line:
            raise MetricsFormatError(f"/metrics: a sample line without a value: {line[:120]!r}")
        name, rest = _name_and_rest(line)
        fields = rest.split()
        if not fields:
            raise MetricsFormatError(f"/metrics: a sample line without a value: {line[:120]!r}")
        try:
            value = float(fields[0])
        except ValueError as e:
            raise MetricsFormatError(f"/metrics: bad value in {line[:120]!r}") from e
        values[name] = values.get(name, 0.0) + value
    return values
