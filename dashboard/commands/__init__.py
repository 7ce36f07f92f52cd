"""Sub-commands of `judgelab`, one module per mechanism."""
