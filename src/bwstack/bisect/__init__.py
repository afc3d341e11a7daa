"""``bwstack bisect``: the search over dated nightly tags (no Docker) and one step on Docker."""
