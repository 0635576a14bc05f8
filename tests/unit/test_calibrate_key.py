"""Which judge set-ups share calibrate's results (``--resume``): the same judge wherever it is served."""

from __future__ import annotations

from polpo.assessment.calibrate_progress import setup_key
from polpo.llm.client import ModelSettings


def test_the_same_judge_served_on_another_port_keeps_its_results() -> None:
    a = ModelSettings("openai/qwen2.5-coder-1.5b-instruct", api_base="http://127.0.0.1:43785/v1", temperature=0)
    moved = ModelSettings("openai/qwen2.5-coder-1.5b-instruct", api_base="http://127.0.0.1:33831/v1", temperature=0)
    assert setup_key([a], None) == setup_key([moved], None)  # a local server started again on a new port


def test_another_model_or_sampling_is_another_measurement() -> None:
    a = ModelSettings("openai/qwen2.5-coder-1.5b-instruct", temperature=0)
    assert setup_key([a], None) != setup_key([ModelSettings("openai/qwen2.5-coder-0.5b-instruct", temperature=0)], None)
    assert setup_key([a], None) != setup_key([ModelSettings("openai/qwen2.5-coder-1.5b-instruct", temperature=0.7)],
                                             None)
    assert setup_key([a], None) != setup_key([a, a], None)  # three seats are not one
