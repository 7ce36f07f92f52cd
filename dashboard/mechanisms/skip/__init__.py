"""The skip mechanism's dashboard half: its CLI and registration (cli.py), and the Skip cache page (`page`) with its
parts: the form (`fields`), the controls (`controls`), the summary (`summary`) and the two tabs (`tabs`)."""
