"""The run's record: the plan, the checkpoint's state, the history, the run directory,
the evidence, and what the bot writes from them. Data and files only: no model, no forge."""
