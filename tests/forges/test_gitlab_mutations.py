"""A review round's answers as GitLab GraphQL documents, and what GitLab's answers say
(pure: no I/O). The documents are checked against the one FakeForge's schema, written
from GitLab's GraphQL reference."""

from __future__ import annotations

import json

import graphql
import pytest

from bot.change_state import ThreadAnswer
from bot.forges.gitlab_mutations import (
    MAX_DOCUMENT_BYTES,
    THREADS_PER_DOCUMENT,
    GraphQLRefused,
    answers_document,
    documents,
    read_answers,
    reopen_document,
)
from tests.fakes import GITLAB_GRAPHQL

MR = "gid://gitlab/MergeRequest/5501"
HOSTILE = 'done") { x } mutation { destroyNote(input: {id: "gid://gitlab/Note/1"}) $b1 \n'


def answer(n: int, body: str = "done", *, resolve: bool = True) -> ThreadAnswer:
    return ThreadAnswer(f"{n:040x}", body, resolve=resolve)


def test_a_document_is_valid_for_gitlab_and_carries_the_replies_as_variables() -> None:
    text, variables = answers_document(MR, [answer(1, HOSTILE), answer(2, resolve=False)])
    assert graphql.validate(GITLAB_GRAPHQL, graphql.parse(text)) == []
    assert "destroyNote" not in text and "done" not in text
    assert variables == {
        "mr": MR,
        "d0": f"gid://gitlab/Discussion/{1:040x}",
        "b0": HOSTILE,
        "d1": f"gid://gitlab/Discussion/{2:040x}",
        "b1": "done",
    }
    assert text.count("createNote(") == 2 and text.count("discussionToggleResolve(") == 1
    assert text.index("r0:") < text.index("s0:") < text.index("r1:")  # reply, then resolve


def test_a_reopening_document_is_valid_for_gitlab() -> None:
    text, variables = reopen_document([f"{1:040x}"])
    assert graphql.validate(GITLAB_GRAPHQL, graphql.parse(text)) == []
    assert "resolve: false" in text and variables == {"d0": f"gid://gitlab/Discussion/{1:040x}"}


def test_many_threads_make_several_documents_in_order() -> None:
    chunks = documents([answer(n) for n in range(45)])
    assert [len(chunk) for chunk in chunks] == [THREADS_PER_DOCUMENT, THREADS_PER_DOCUMENT, 5]
    assert [a.thread_id for chunk in chunks for a in chunk] == [f"{n:040x}" for n in range(45)]


def test_long_replies_make_documents_of_bounded_size() -> None:
    long = "x" * 20_000
    chunks = documents([answer(n, long) for n in range(7)] + [answer(9, "y" * 100_000)])
    for chunk in chunks:
        text, variables = answers_document(MR, chunk)
        sent = len(json.dumps({"query": text, "variables": variables}))
        assert sent <= MAX_DOCUMENT_BYTES or len(chunk) == 1  # a longer single one goes alone
    assert [len(chunk) for chunk in chunks] == [3, 3, 1, 1]


def test_each_mutation_is_read_with_its_own_errors_and_the_top_level_ones() -> None:
    answers = [answer(1), answer(2), answer(3), answer(4, resolve=False), answer(5)]
    said = {
        "data": {
            "r0": {"note": {"id": "gid://gitlab/DiscussionNote/1"}, "errors": []},
            "s0": {"discussion": {"id": "x", "resolved": True}, "errors": []},
            "r1": {"note": None, "errors": ["Note can't be blank"]},
            "s1": {"discussion": {"id": "x", "resolved": True}, "errors": []},
            "r2": {"note": {"id": "gid://gitlab/DiscussionNote/3"}, "errors": []},
            "s2": None,
            "r3": None,
            "r4": {"note": {"id": "gid://gitlab/DiscussionNote/5"}, "errors": []},
            "s4": {"discussion": {"id": "x", "resolved": False}, "errors": []},
        },
        "errors": [{"message": "The resource is gone", "path": ["s2"]},
                   {"message": "Internal server error", "path": ["r3"]}],
    }  # fmt: skip
    found = read_answers(answers, said)
    assert found.answered == [f"{1:040x}"]
    assert found.failed == {
        f"{2:040x}": "reply refused: Note can't be blank",
        f"{3:040x}": "not resolved: The resource is gone",
        f"{4:040x}": "reply refused: Internal server error",
        f"{5:040x}": "not resolved: the discussion is not resolved",
    }
    assert found.resolved_bare == [f"{2:040x}"]  # to be opened again


def test_a_missing_result_is_a_failure() -> None:
    found = read_answers([answer(1)], {"data": {}})
    assert found.failed == {f"{1:040x}": "reply refused: GitLab sent no result"}


@pytest.mark.parametrize(
    "said",
    [
        {"errors": [{"message": "Field 'discussionToggleResolve' doesn't exist on type "
                                "'Mutation'"}]},
        {"data": None, "errors": [{"message": "Variable $mr of type NoteableID! was provided "
                                              "invalid value"}]},
    ],
)  # fmt: skip
def test_a_document_gitlab_ran_none_of_is_refused(said: dict[str, object]) -> None:
    with pytest.raises(GraphQLRefused, match="refused the document"):
        read_answers([answer(1)], said)
