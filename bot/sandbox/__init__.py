"""The machine the agent's tools run in: the workspace's clone, the sandbox (bubblewrap,
overlay, bounds), the egress proxy, set-up and its cache, link-safe copies."""
