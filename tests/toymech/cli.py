"""`judgelab toy …`: the toy's sub-app."""

import typer

app = typer.Typer(help="Toy: counts values over a bar.", no_args_is_help=True)


@app.command("count")
def count_cmd(values: list[float], threshold: float = 0.5) -> None:
    """How many of VALUES clear --threshold."""
    typer.echo(f"{sum(v >= threshold for v in values)} of {len(values)}")
