"""`bot eval`: measure the agent on SWE-bench tasks and on a repository's own history."""
