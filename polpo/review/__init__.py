"""The ``llm_review`` expectation: G-Eval reviewer panel, median consensus, dimensions, and the expectation judge.

Entry points for the engine:

* :func:`~polpo.review.dimensions.needs_generation`,
  :func:`~polpo.review.dimensions.generate_dimensions`, :func:`~polpo.review.dimensions.choose`
  — the dimension set, chosen once per task and check and stored (``dims_to_json`` / ``dims_from_json``);
* :func:`~polpo.review.panel.run_panel` with a :class:`~polpo.review.reviewer.ReviewContext`
  → :class:`~polpo.review.panel.PanelResult`;
* :func:`~polpo.assessment.judge.judge_expectations` → :class:`~polpo.assessment.judge.JudgeResult`.

Submodules are imported explicitly by callers; this package module imports nothing, so importing one part does
not pull in the others.
"""
