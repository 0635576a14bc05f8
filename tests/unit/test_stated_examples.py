"""The examples a task states about its own result (pure): doctests, one-line ``f(x) ➞ y`` forms about a function
the work defines, and, when the work defines one function, HumanEval's "For x = V the output should be W" and
"Input: V" / "Output: W" forms. Prose is never taken for an example, and neither is a definition."""

from __future__ import annotations

from polpo.review.stated_examples import MAX_EXAMPLES, StatedExample, defined_names, find_examples

BELOW_ZERO = '''from typing import List


def below_zero(operations: List[int]) -> bool:
    """ Detect if the balance falls below zero.
    >>> below_zero([1, 2, 3])
    False
    >>> below_zero([1, 2, -4, 5])
    True
    """
    balance = 0
    for op in operations:
        balance += op
        if balance < 0:
            return True
    return False
'''


def found(text: str, source: str = BELOW_ZERO, origin: str = "task") -> list[tuple[str, str, str]]:
    return [(e.source, e.want, e.style) for e in find_examples([(origin, text)], [source])]


def test_doctests_in_a_docstring_with_their_origin() -> None:
    examples = find_examples([("solution.py", BELOW_ZERO)], [BELOW_ZERO])
    assert examples == [StatedExample("below_zero([1, 2, 3])", "False", "doctest", "solution.py"),
                        StatedExample("below_zero([1, 2, -4, 5])", "True", "doctest", "solution.py")]


def test_the_closing_quotes_end_the_last_output() -> None:
    src = 'def f(x):\n    """Add one.\n    >>> f(1)\n    2"""\n    return x + 1\n'
    assert found(src, src) == [("f(1)", "2", "doctest")]


def test_a_comparison_without_an_output_line_states_that_it_is_true() -> None:
    text = ">>> below_zero([]) == False\n>>> below_zero([-1])\nTrue\n"
    assert found(text) == [("below_zero([]) == False", "True", "value"), ("below_zero([-1])", "True", "doctest")]


def test_statements_of_a_doctest_session_are_kept_in_order_imports_are_not() -> None:
    text = ">>> import math\n>>> ops = [1, -2]\n>>> below_zero(ops)\nTrue\n"
    assert found(text) == [("ops = [1, -2]", "", "doctest"), ("below_zero(ops)", "True", "doctest")]


def test_one_line_forms_about_a_function_the_work_defines() -> None:
    text = "\n".join(["below_zero([1, -2]) ➞ True", "- below_zero([]) => False", "below_zero([5]) == False.",
                      "below_zero([-3]) should return True", "e.g. below_zero([2, -1]) -> False",
                      "below_zero([0]) returns `False`"])
    assert [(s, w) for s, w, _ in found(text)] == [
        ("below_zero([1, -2])", "True"), ("below_zero([])", "False"), ("below_zero([5])", "False"),
        ("below_zero([-3])", "True"), ("below_zero([2, -1])", "False"), ("below_zero([0])", "False")]


def test_prose_is_not_taken_for_an_example() -> None:
    text = "\n".join([
        "print(x) -> shows x",  # print is not a function the work defines
        "helper(1) -> 2",  # neither is helper
        "below_zero(ops) -> True when the balance dips",  # not a value
        "fib(n) -> fib(n - 1) + fib(n - 2)",  # a definition, not an example
        "The function below_zero(list) returns a bool.",
    ])
    fib = "def fib(n):\n    return n\n"
    assert find_examples([("task", text)], [BELOW_ZERO, fib]) == []


def test_a_definition_with_free_names_is_not_an_example() -> None:
    fib4 = "def fib4(n):\n    return n\n"
    text = "fib4(0) -> 0\nfib4(3) -> 0\nfib4(n) -> fib4(n-1) + fib4(n-2) + fib4(n-3) + fib4(n-4).\n"
    assert found(text, fib4) == [("fib4(0)", "0", "value"), ("fib4(3)", "0", "value")]


def test_the_same_example_stated_twice_is_kept_once_where_first_stated() -> None:
    examples = find_examples([("task", ">>> below_zero([1, 2, 3])\nFalse\n"), ("solution.py", BELOW_ZERO),
                              ("README.md", "below_zero([1,   2, 3]) ➞ False")], [BELOW_ZERO])
    assert [(e.source, e.origin, e.style) for e in examples] == [  # the README's is the task's, spaced out
        ("below_zero([1, 2, 3])", "task", "doctest"), ("below_zero([1, 2, -4, 5])", "solution.py", "doctest")]


def test_at_most_max_examples() -> None:
    text = "\n".join(f">>> below_zero([{i}])\nFalse" for i in range(MAX_EXAMPLES + 10))
    assert len(found(text)) == MAX_EXAMPLES


# ------------------------------------------------------------------------------------------ HumanEval's forms

SUM_SQUARES = "import math\n\ndef sum_squares(lst):\n    return sum(math.ceil(i) ** 2 for i in lst)\n"
REVERSE_DELETE = "def reverse_delete(s, c):\n    s = ''.join(ch for ch in s if ch not in c)\n    return (s, s == s[::-1])\n"


def test_for_x_the_output_should_be_calls_the_one_function_by_parameter_name() -> None:  # HumanEval/133
    text = ("You are given a list of numbers.\n    Examples:\n    For lst = [1,2,3] the output should be 14\n"
            "    For lst = [1.4,4.2,0] the output should be 29.\n")
    assert found(text, SUM_SQUARES) == [("sum_squares(lst = [1,2,3])", "14", "value"),
                                        ("sum_squares(lst = [1.4,4.2,0])", "29", "value")]


def test_an_unnamed_example_is_found_on_any_line_of_a_longer_text() -> None:
    text = "Sum the squares.\n    For lst = [1,2,3] the output should be 14\n    Round each up first.\n"
    assert found(text, SUM_SQUARES) == [("sum_squares(lst = [1,2,3])", "14", "value")]
    text = "Example:\n    Input: [1, 2]\n    Output: 5\n    That is all.\n"
    assert found(text, SUM_SQUARES) == [("sum_squares([1, 2])", "5", "value")]


def test_for_several_parameters_the_result_should_be() -> None:  # HumanEval/112
    text = ('For s = "abcde", c = "ae", the result should be (\'bcd\',False)\n'
            'For s = "abcdef", c = "b"  the result should be (\'acdef\',False)\n')
    assert found(text, REVERSE_DELETE) == [('reverse_delete(s = "abcde", c = "ae")', "('bcd',False)", "value"),
                                           ('reverse_delete(s = "abcdef", c = "b")', "('acdef',False)", "value")]


def test_for_form_prose_after_the_assignment_is_cut_at_a_comma() -> None:  # HumanEval/84
    solve = "def solve(N):\n    return bin(sum(int(d) for d in str(N)))[2:]\n"
    text = 'For N = 150, the sum of digits will be 6 the output should be "110".\n'
    assert found(text, solve) == [('solve(N = 150)', '"110"', "value")]


def test_for_form_names_must_be_the_functions_parameters() -> None:
    assert found("For x = 3 the output should be 9\n", SUM_SQUARES) == []
    assert found("For lst = [1] the output should be true\n", SUM_SQUARES) == [
        ("sum_squares(lst = [1])", "True", "value")]


def test_input_output_lines_for_a_one_parameter_function() -> None:  # HumanEval/68
    pluck = "def pluck(arr):\n    return []\n"
    text = "Example 1:\n    Input: [4,2,3]\n    Output: [2, 1]\n\n    Example 2:\n    Input: []\n    Output: []\n"
    assert found(text, pluck) == [("pluck([4,2,3])", "[2, 1]", "value"), ("pluck([])", "[]", "value")]


def test_input_output_lines_that_name_the_parameters() -> None:  # HumanEval/120, /122
    maximum = "def maximum(arr, k):\n    return sorted(arr)[-k:]\n"
    text = ("Input: arr = [-3, -4, 5], k = 3\nOutput: [-4, -3, 5]\n"
            "Input: arr = [111,21,3], k = 2\nOutput: 24 # sum of 21 + 3\n")
    assert found(text, maximum) == [("maximum(arr = [-3, -4, 5], k = 3)", "[-4, -3, 5]", "value"),
                                    ("maximum(arr = [111,21,3], k = 2)", "24 # sum of 21 + 3", "value")]


def test_a_bare_input_needs_a_one_parameter_function() -> None:
    assert found("Input: [1, 2]\nOutput: 3\n", REVERSE_DELETE) == []
    assert found("Input:\nOutput: 6\n", "def f(grid):\n    return 6\n") == []  # nothing to call it with


def test_the_unnamed_forms_need_exactly_one_function() -> None:
    two = SUM_SQUARES + "\n\ndef helper(x):\n    return x\n"
    assert found("For lst = [1,2,3] the output should be 14\n", two) == []
    private = SUM_SQUARES + "\n\ndef _helper(x):\n    return x\n\n\ndef test_it():\n    assert True\n"
    assert found("For lst = [1,2,3] the output should be 14\n", private) == [
        ("sum_squares(lst = [1,2,3])", "14", "value")]  # a private helper and a test are not candidates
    assert found("For lst = [1,2,3] the output should be 14\n", "x = 1\n") == []


def test_defined_names_lists_functions_classes_and_methods_of_files_that_parse() -> None:
    sources = ["def f():\n    pass\n\nclass C:\n    def m(self):\n        pass\n", "def broken(:\n"]
    assert defined_names(sources) == {"f", "C", "C.m"}
