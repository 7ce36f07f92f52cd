"""Hand raise (moved into a package; split by concept in the next commit)."""

from engine.handraise.decisions import *  # noqa: F403
