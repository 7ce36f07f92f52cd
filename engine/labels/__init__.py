"""Labels: the researcher's own judgments as data (core), the items of stored runs that can be labelled and the
queue that draws them (items), the judges' agreement with the labels (agreement), export/import (io), and
a hand-raise map refitted from them (refit). Everything is re-exported here."""

from engine.labels.core import (
    MECHANISMS,
    POSITIVE,
    SOURCES,
    VALUES,
    Label,
    LabelError,
    add_label,
    check_label,
    count_labels,
    default_user,
    delete_label,
    item_key,
    latest_only,
    list_labels,
)

__all__ = [
    "MECHANISMS",
    "POSITIVE",
    "SOURCES",
    "VALUES",
    "Label",
    "LabelError",
    "add_label",
    "check_label",
    "count_labels",
    "default_user",
    "delete_label",
    "item_key",
    "latest_only",
    "list_labels",
]
