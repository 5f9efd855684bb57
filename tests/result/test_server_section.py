"""result.json's server section (schema 6): older files read with it null and the reason; the
section round-trips; a run of an in-process engine leaves it null."""

from __future__ import annotations

from llem.result import RunResult, ServerSection


def test_a_schema_5_file_reads_with_server_null_and_why() -> None:
    old = RunResult(status="ok").to_json()
    old["schema_version"] = 5
    del old["quality"], old["boundary"], old["server"]
    read = RunResult.from_json(old)
    assert read.schema_version == 8 and read.server is None
    assert read.null_reasons["server"] == "not recorded before result schema 6"


def test_the_section_round_trips() -> None:
    result = RunResult(status="ok")
    result.server = ServerSection(
        url="http://127.0.0.1:8000",
        launched=True,
        endpoint="chat",
        model="m",
        command="python -m vllm.entrypoints.openai.api_server --model m --port 8000",
        version="0.32.0",
        launch_to_ready_s=41.5,
        log="/runs/x/server.log",
    )
    read = RunResult.from_json(result.to_json())
    assert read.server == result.server
    assert read.to_json()["server"]["metrics_source"] is None


def test_a_new_result_has_no_server_section() -> None:
    assert RunResult(status="ok").to_json()["server"] is None
