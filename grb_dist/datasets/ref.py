"""A dataset as a job or a command names it, read by one rule, once: :func:`dataset_ref`.

``--dataset`` (and a job's ``dataset:``) is either a catalogue name or a path to a dataset
on disk (a directory in the GRB layout, an ``.npz`` file). The rule:

1. text that looks like a path (a directory part, a leading ``.`` or ``~``, an ``.npz``
   suffix: :func:`~grb_dist.core.bounds.looks_like_path`) is a path;
2. a plain name is the catalogue's when the catalogue has it, and a path when something of
   that name exists in the working directory; when both hold, it is an error that says how
   to name each (``./grb-cora`` for the folder);
3. a plain name that is neither stays a name: loading it says that no dataset has it, with
   the closest catalogue names.

The job a dataset runs, the graph it loads and the name of its run's partition all follow
from the one :class:`DatasetRef` this gives.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from grb_dist.core.bounds import check_dataset_ref, looks_like_path
from grb_dist.core.errors import ConfigError
from grb_dist.datasets.catalog import CATALOG


@dataclass(frozen=True)
class DatasetRef:
    """A dataset reference, resolved (:func:`dataset_ref`).

    Attributes:
        given: the text as the user gave it.
        catalogue: the catalogue's spelling of its name, when it names a catalogue dataset.
        path: the path, when it names a dataset on disk.
    """

    given: str
    catalogue: str | None = None
    path: Path | None = None

    @property
    def is_path(self) -> bool:
        return self.path is not None


def dataset_ref(dataset: str | os.PathLike) -> DatasetRef:
    """``dataset`` resolved by the module's rule; raises :class:`ConfigError` on a malformed
    reference and on a plain name that is both a catalogue dataset and a file or folder of
    the working directory."""
    if isinstance(dataset, os.PathLike):  # a Path object is meant as a path
        return DatasetRef(str(dataset), path=Path(dataset))
    text = check_dataset_ref(dataset)
    if looks_like_path(text):
        return DatasetRef(text, path=Path(text))
    here = os.path.lexists(text)
    if text in CATALOG:
        if here:
            kind = "folder" if os.path.isdir(text) else "file"
            raise ConfigError(
                f"dataset {text!r} is both a catalogue dataset and a {kind} in this directory; write "
                f"./{text} for the {kind} here, or run from another directory for the catalogue's")
        return DatasetRef(text, catalogue=CATALOG.canonical(text))
    return DatasetRef(text, path=Path(text)) if here else DatasetRef(text)


__all__ = ["DatasetRef", "dataset_ref"]
