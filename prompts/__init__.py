"""The prompt templates, one per phase, shipped as the package ``bot._prompts``.

The folder stays at the top of the repository; pyproject.toml maps it into the ``bot`` package
(``package-dir``) so ``bot.llm.prompts`` reads it with ``importlib.resources`` from an editable
install and from a wheel alike. This file only makes it a regular package.
"""
