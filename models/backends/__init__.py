"""One module per provider. models.discovery imports them all to find the backends (each ChatModel class that
declares `requires` registers itself); that is cheap, since a provider's SDK is imported only when a model
of it is built."""
