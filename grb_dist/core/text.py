"""How grb_dist writes counts, durations and numbers for people and for CSV files.

* :func:`plural`: a count with its noun in the right number (``1 surrogate``, ``2 surrogates``,
  ``1 difficulty``, ``3 difficulties``), for every count the commands print;
* :func:`duration`: a span of seconds in words (``12.3 s``, ``4 min 05 s``, ``2 h 10 min``,
  ``1 d 03 h``), for every time the commands print: a plan's forecast, a sweep's or a
  training's time, the time left of a sweep's stage, a calibration or a study;
* :func:`csv_text`: a table as CSV text with every column named and floats rounded to
  :data:`CSV_FLOAT_FORMAT` (6 significant digits). The Parquet files keep full precision; a
  CSV is for reading and spreadsheets, where float32 noise (``0.8844444553057353``) says
  nothing.

No pandas import here: :func:`csv_text` takes a frame from its caller.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: How floats are written in every CSV file grb_dist writes: 6 significant digits.
CSV_FLOAT_FORMAT = "%.6g"


#: Nouns whose plural the rules of :func:`plural_form` get wrong.
_EXCEPTIONS = {"epoch": "epochs"}


def plural_form(noun: str) -> str:
    """The plural of ``noun``: ``difficulty`` -> ``difficulties``, ``batch`` -> ``batches``,
    ``surrogate`` -> ``surrogates``, ``epoch`` -> ``epochs``."""
    head, _, last = noun.rpartition(" ")
    if last in _EXCEPTIONS:
        return f"{head} {_EXCEPTIONS[last]}".lstrip()
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def plural(count: int, noun: str, many: Optional[str] = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless ``count`` is 1: ``plural(1,
    "surrogate")`` is ``1 surrogate``, ``plural(2_000, "node")`` is ``2,000 nodes`` (whole
    numbers with thousands separators). ``many`` gives a plural the rule does not know."""
    number = f"{int(count):,}" if isinstance(count, numbers.Integral) else f"{count:g}"
    return f"{number} {noun if count == 1 else (many or plural_form(noun))}"


def duration(seconds: float) -> str:
    """``seconds`` in words, to the tenth of a second below a minute and in two units above:
    ``duration(0.42)`` is ``0.4 s``, ``duration(245)`` is ``4 min 05 s``, ``duration(7800)``
    is ``2 h 10 min``, ``duration(97200)`` is ``1 d 03 h`` (the smaller unit cut, not rounded)."""
    seconds = max(0.0, float(seconds))
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    seconds = max(seconds, 60.0)  # what would round to 60.0 s is a minute
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    return f"{int(seconds // 86400)} d {int(seconds % 86400 // 3600):02d} h"


def csv_text(frame: "pd.DataFrame", index_label: Optional[str] = None) -> str:
    """``frame`` as CSV text (``\\n`` line ends), floats written with :data:`CSV_FLOAT_FORMAT`.
    Its index is written only when ``index_label`` names it, so that no column of the file
    is unnamed."""
    return frame.to_csv(index=index_label is not None, index_label=index_label, float_format=CSV_FLOAT_FORMAT,
                        lineterminator="\n")


__all__ = ["CSV_FLOAT_FORMAT", "csv_text", "duration", "plural", "plural_form"]
