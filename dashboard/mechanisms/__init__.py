"""Each mechanism's dashboard half, mirroring its engine package (`engine/<name>/`): what its pages draw (forms,
views, charts) beside its CLI and its registration (docs/adding-a-mechanism.md)."""
