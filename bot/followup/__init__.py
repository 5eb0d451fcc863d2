"""After the change request: the pure decisions on the bot's own change requests.

- ``ci``: one decision per head commit once its checks settle, and what to do with it
  (wait, fix, report, give up, mark ready), rounds counted against ``ci.max_fix_rounds``;
- ``ci_context``: the failed checks as untrusted, redacted, bounded text for the agent;
- ``review``: when a review round is due, which threads it covers, what to do with each;
- ``branch``: conflicts with the base, and how to bring the base in without rewriting
  anyone else's commits.

Nothing here does I/O: the worker fetches (``bot.forges.base.ChangeRequestFollowUp``),
calls these, and acts. The rooms below: ``bot.events``, ``bot.change_state``,
``bot.config``, ``bot.redact``.
"""
