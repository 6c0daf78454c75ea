"""The ledger's one decision (ledger/decide.py): every row of its table, both columns."""

from __future__ import annotations

import pytest

from langgraph_durable.ledger.decide import Answer, Facts, decide, execution_of

R, N, A = Answer.REPLAY, Answer.NEW, Answer.ASK

# (row, facts, with the same request, with another request)
ROWS = [
    (1, Facts(rolled_back=True, same_start=True, same_decision=True), N, N),
    (2, Facts(sibling=True, same_start=True, recorded_run="r", run="r"), N, N),
    (3, Facts(forked=True, same_start=True, start_saved=True), A, A),
    (4, Facts(forked=True, start_saved=True, same_decision=True), N, N),
    (5, Facts(resume_changed=True, same_start=True), A, N),
    (6, Facts(same_decision=True, recorded_run="r1", run="r2", start_saved=True), R, A),
    (7, Facts(same_start=True, recorded_run="r1", run="r2", start_saved=True), R, A),
    (8, Facts(recorded_run="r1", run="r2"), N, N),
    (9, Facts(recorded_run="r1", run="r1", start_saved=True), R, A),
    (10, Facts(start_saved=True, recorded_run="r1"), A, A),
    (10, Facts(), A, A),
]


@pytest.mark.parametrize(
    ("row", "facts", "same", "other"), ROWS, ids=[f"row{r[0]}-{i}" for i, r in enumerate(ROWS)]
)
def test_every_row_answers_as_its_table_says(
    row: int, facts: Facts, same: Answer, other: Answer
) -> None:
    for same_request, expected in ((True, same), (False, other)):
        verdict = decide(Facts(**{**vars(facts), "same_request": same_request}))
        assert (verdict.row, verdict.answer) == (row, expected), verdict


def test_the_table_in_the_docstring_is_the_one_the_code_follows() -> None:
    import langgraph_durable.ledger.decide as module

    table = [line for line in (module.__doc__ or "").splitlines() if line[:2].strip().isdigit()]
    rows = {int(line.split()[0]): line for line in table}
    assert sorted(rows) == list(range(1, 11))
    for row, _, same, other in ROWS:
        words = rows[row].split()
        assert words[-2:] == [same.name, other.name], rows[row]


def test_replay_needs_proof_of_the_execution_and_the_request() -> None:
    """No combination of facts replays without one of rows 6, 7, 9 and the same request."""
    import itertools

    names = [
        "rolled_back",
        "sibling",
        "forked",
        "same_start",
        "resume_changed",
        "same_decision",
        "start_saved",
        "same_request",
    ]
    for values in itertools.product([False, True], repeat=len(names)):
        for runs in ((None, None), ("r1", "r1"), ("r1", "r2"), ("r1", None)):
            facts = Facts(**dict(zip(names, values)), recorded_run=runs[0], run=runs[1])
            verdict = decide(facts)
            if verdict.answer is R:
                assert facts.same_request and not facts.forked and not facts.rolled_back
                assert facts.same_decision or facts.same_start or runs == ("r1", "r1")
            if verdict.answer is N:  # new only on a proof of another execution
                assert (
                    facts.rolled_back
                    or facts.sibling
                    or facts.forked
                    or facts.resume_changed
                    or runs == ("r1", "r2")
                )


def test_the_execution_alone_is_judged_with_the_request_taken_as_equal() -> None:
    assert execution_of(Facts(same_start=True)) is R
    assert execution_of(Facts(resume_changed=True, same_start=True)) is A
    assert execution_of(Facts(start_saved=True)) is A
    assert execution_of(Facts(start_saved=True, forked=True)) is N
    assert execution_of(Facts()) is A
