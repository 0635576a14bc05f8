from __future__ import annotations

from polpo.agents.prompts import build_prompt
from polpo.assessment.feedback import feedback_text
from polpo.checks.base import CheckOutcome


def test_feedback_names_failed_checks_and_agent_failure() -> None:
    text = feedback_text(
        checks=[
            CheckOutcome("file_exists", "a.txt", False, "Missing 1/1 file(s): a.txt", "a.txt"),
            CheckOutcome("test", "true", True, "Test passed: true"),
        ],
        exit_code=2,
        timed_out=False,
        error=None,
        stderr_tail="boom",
    )
    assert "exited with code 2" in text
    assert "boom" in text
    assert "file_exists: Missing 1/1 file(s): a.txt" in text
    assert "Test passed" not in text


def test_feedback_of_an_agent_that_exited_0_without_changes_quotes_its_stdout() -> None:
    failed = [CheckOutcome("file_exists", "calc.py", False, "Missing 1/1 file(s): calc.py")]
    out = "Model: openai/gpt-4o-mini\nlitellm.AuthenticationError: Incorrect API key provided."
    text = feedback_text(checks=failed, exit_code=0, timed_out=False, error=None, stderr_tail="", stdout_tail=out)
    assert text.splitlines()[:3] == ["The agent exited 0 but changed no file; its output ended with:",
                                     "  Model: openai/gpt-4o-mini",
                                     "  litellm.AuthenticationError: Incorrect API key provided."]
    assert "file_exists: Missing 1/1 file(s): calc.py" in text
    # a failed exit still reports stderr, not stdout
    text = feedback_text(checks=failed, exit_code=1, timed_out=False, error=None, stderr_tail="boom", stdout_tail=out)
    assert "boom" in text and "AuthenticationError" not in text


def test_fix_prompt_carries_feedback_and_original_task() -> None:
    p = build_prompt(
        title="T",
        description="do it",
        mission_name="M",
        mission_description=None,
        expectations=[{"type": "test", "command": "pytest"}],
        kind="fix",
        feedback="- test: Test failed: pytest (exit 1)",
        attempt_label=" 1/2",
    )
    assert p.startswith("TARGETED FIX 1/2")
    assert "Test failed: pytest" in p
    assert "# T\n\ndo it" in p
    assert "test: `pytest`" in p


def test_initial_prompt_has_no_feedback_section() -> None:
    p = build_prompt(
        title="T",
        description="do it",
        mission_name="M",
        mission_description="goal",
        expectations=[],
        kind="initial",
        feedback=None,
    )
    assert "FIX" not in p and "RETRY" not in p
    assert "Mission: M — goal" in p
