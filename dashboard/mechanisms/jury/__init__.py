"""The jury's dashboard half: its view of a run (`view`), drawn by the Jury page and the Replay page."""
