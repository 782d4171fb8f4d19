"""kubesim fixtures: filled in by the simulator work."""
