from bot.events import CommandName
from bot.webhooks.commands import help_text, mention_text, parse_commands


def names(body: str) -> list[tuple[CommandName, str]]:
    return [(c.name, c.args) for c in parse_commands(body, prefix="/agent")]


def test_one_command_per_line_several_per_comment() -> None:
    body = "Thanks!\n/agent run add a test too\n/agent status\n"
    assert names(body) == [(CommandName.RUN, "add a test too"), (CommandName.STATUS, "")]


def test_every_documented_command_parses() -> None:
    for word in [
        "run",
        "plan",
        "approve",
        "reject",
        "stop",
        "pause",
        "resume",
        "retry",
        "status",
        "help",
    ]:
        assert names(f"/agent {word}") == [(CommandName(word), "")]
    assert names("/agent reject the tests are wrong") == [
        (CommandName.REJECT, "the tests are wrong")
    ]


def test_case_and_whitespace() -> None:
    assert names("   /agent   RUN   now  ") == [(CommandName.RUN, "now")]


def test_quoted_and_fenced_lines_are_not_commands() -> None:
    body = "> /agent stop\n```\n/agent run\n```\n~~~\n/agent stop\n~~~\n/agent status"
    assert names(body) == [(CommandName.STATUS, "")]


def test_prefix_must_be_a_whole_word_and_bare_prefix_is_help() -> None:
    assert names("/agentx run") == []
    assert names("please /agent run") == []
    assert names("/agent") == [(CommandName.HELP, "")]


def test_unknown_command_keeps_the_word() -> None:
    [command] = parse_commands("/agent deploy prod", prefix="/agent")
    assert command.name is CommandName.UNKNOWN
    assert command.args == "deploy"
    assert command.raw == "/agent deploy prod"


def test_custom_prefix() -> None:
    assert [(c.name, c.args) for c in parse_commands("/bot stop", prefix="/bot")] == [
        (CommandName.STOP, "")
    ]


def test_mentions() -> None:
    names_ = ("coding-agent[bot]",)
    assert mention_text("@coding-agent please fix the typo", bot_names=names_) == (
        "please fix the typo"
    )
    assert mention_text("hey @Coding-Agent[bot] do it", bot_names=names_) == "hey  do it"
    assert mention_text("email me at x@coding-agent.dev", bot_names=names_) is None
    assert mention_text("@coding-agent-fan hi", bot_names=names_) is None


def test_mentions_in_quotes_and_code_blocks_do_not_count() -> None:
    names_ = ("coding-agent[bot]",)
    assert mention_text("> @coding-agent fix the typo\nI agree", bot_names=names_) is None
    fenced = "Log:\n```\nping @coding-agent\n```\n~~~\n@coding-agent\n~~~"
    assert mention_text(fenced, bot_names=names_) is None
    body = "> @coding-agent earlier\n@coding-agent use this:\n```\nx = 1\n```"
    assert mention_text(body, bot_names=names_) == (
        "> @coding-agent earlier\n use this:\n```\nx = 1\n```"
    )


def test_help_lists_every_command() -> None:
    text = help_text("/agent")
    for name in CommandName:
        if name is not CommandName.UNKNOWN:
            assert f"`/agent {name.value}`" in text
