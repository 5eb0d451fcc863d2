"""Run by tests/test_wheel.py with the python of a fresh virtualenv that has the wheel installed.

It renders every prompt (with the variables of tests/agent/test_prompts.py) and every comment
template in every language, then prints as JSON where each ``bot`` module came from, so the
test can check that nothing was read from the checkout. Not collected by pytest (no ``test_``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import jinja2.meta
import yaml

from bot.comments.render import LANGUAGES, render, template_keys
from bot.llm.prompts import PHASES, TEMPLATES, PromptLibrary, default_prompt_dir


class Sample(str):
    """A value every comment template accepts: text, a one-item list, any attribute."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Sample:
        if name.startswith("__"):
            raise AttributeError(name)
        return Sample(name)

    def __iter__(self) -> Any:
        return iter([self])


def _prompt_variables() -> ModuleType:
    path = Path(__file__).resolve().parent / "agent" / "test_prompts.py"
    spec = importlib.util.spec_from_file_location("wheel_probe_prompt_variables", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render_prompts() -> list[str]:
    library = PromptLibrary()
    variables = _prompt_variables().VARIABLES
    rendered = []
    for phase in PHASES:
        rendered += [m.content for m in library.messages(phase, **variables[phase])]
    names = {p.name for p in default_prompt_dir().iterdir() if p.name.endswith(".j2")}
    assert names == {f"{name}.j2" for name in TEMPLATES}, names
    return rendered


def render_comments(language: str) -> list[str]:
    text = resources.files("bot.comments").joinpath(f"templates/{language}.yaml").read_text()
    sources = yaml.safe_load(text)
    assert set(sources) == template_keys(language)
    env = jinja2.Environment(autoescape=False)  # noqa: S701 (only parsed, never rendered)
    rendered = []
    for key, source in sorted(sources.items()):
        names = jinja2.meta.find_undeclared_variables(env.parse(source))
        rendered.append(render(key, language, **{name: Sample(name) for name in names}))
    return rendered


def main() -> None:
    prompts = render_prompts()
    comments = {language: render_comments(language) for language in LANGUAGES}
    texts = prompts + [text for texts in comments.values() for text in texts]
    assert all("{{" not in text and "{%" not in text for text in texts)
    modules = {
        name: str(getattr(module, "__file__", None))
        for name, module in sorted(sys.modules.items())
        if name == "bot" or name.startswith("bot.")
    }
    report = {
        "prompts": len(prompts),
        "comments": {language: len(texts) for language, texts in comments.items()},
        "prompt_dir": str(default_prompt_dir()),
        "modules": modules,
        "editable": [name for name in sys.modules if name.startswith("__editable__")],
        "sys_path": sys.path,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
