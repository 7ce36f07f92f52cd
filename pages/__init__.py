"""One module per screen; each exposes render()."""
