"""The jury's dashboard half: its view of a run (`view`), drawn by the Jury page and the Replay page; the Jury page
(`page`) with its panel (`panel`, `judging`), case picker (`case`) and form (`fields`); its CLI (`cli`)."""
