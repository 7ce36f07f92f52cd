"""The handraise mechanism's dashboard half: its CLI and registration (cli.py), its page's parts."""
