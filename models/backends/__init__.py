"""One module per provider; each is imported only when a model of that backend is used."""
