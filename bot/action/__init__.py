"""``bot action``: the bot as a GitHub Action, one workflow run per event, nothing to host.

A thin adapter over the same code as the App: the runner's event file becomes the same
``ForgeEvent`` a webhook would (``webhooks/github_runner.py``), the dispatcher classifies,
checks the actor's permission and decides, the worker runs the task in this process to
its next resting point, and the reporter writes the issue's status comment and labels.
What is new here is only what a runner needs:

- ``environment``: the runner's variables and the settings built from them;
- ``event``: the event file read, and a hand-started run's issue looked up;
- ``state``: the task's store, history, run directory and resting workspace, packed at
  the end of a run and unpacked at the start of the next (``StateCarrier``);
- ``artifacts``: the carrier of a real runner (the previous run's artifact, found and
  downloaded through the Actions REST API; ``action.yml`` uploads the next one);
- ``summary``: the step summary and the step's outputs;
- ``checks``: what must hold before a task runs (the model's key, the sandbox);
- ``connect``: the GitHub adapter from the environment (a token, or an App's
  installation token that is revoked at the end);
- ``run``: one run, start to end.
"""
