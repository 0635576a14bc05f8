"""The ``llm_review`` expectation: G-Eval reviewer panel, median consensus, dimensions, and the expectation judge.

Entry points for the engine:

* :func:`~polpo.assessment.review.dimensions.needs_generation`,
  :func:`~polpo.assessment.review.dimensions.generate_dimensions`, :func:`~polpo.assessment.review.dimensions.choose`
  — the dimension set, chosen once per task and check and stored (``dims_to_json`` / ``dims_from_json``);
* :func:`~polpo.assessment.review.panel.run_panel` with a :class:`~polpo.assessment.review.reviewer.ReviewContext`
  → :class:`~polpo.assessment.review.panel.PanelResult`;
* :func:`~polpo.assessment.review.judge.judge_expectations` → :class:`~polpo.assessment.review.judge.JudgeResult`.

Submodules are imported explicitly by callers; this package module imports nothing, so importing one part does
not pull in the others.
"""
