"""Delimited text tables (CSV, TSV) as the command line reads them, and the columns a model was
fitted on, so that new files are read the same way.

:func:`read_table` reads a file whole:

- encoding: UTF-8, with or without a byte-order mark, or UTF-16/UTF-32 with one (what
  spreadsheet programs save as "Unicode text"); anything else is refused, naming the fix;
- delimiter: the one given (one character, or ``tab``, ``comma``, ``semicolon``, ``pipe``,
  ``space``), else the first of ``,`` tab ``;`` ``|`` that splits the first rows into one number
  (> 1) of fields, preferring the one whose cells are numbers; quoted fields (``"a, b"``) are read
  as the csv module reads them, blank lines are skipped, cells are stripped of spaces;
- header: as given, else detected: the first row is a header when one of its cells is text (or
  empty) above a column of numbers, or when its cells are all text, distinct, and none of them
  appears again in its column below.

A table whose cells are all numbers is parsed by numpy's C reader; any other is parsed by the csv
module, which also locates every error: each :class:`TableError` is one line naming the file, the
line, the column and the fix.

:class:`Layout` records how a training file was read (its columns, the target column, the
categories of the text columns one-hot encoded, the kind of labels); :func:`fit_arrays` makes
``X, y`` and the layout from a table, :func:`predict_arrays` reads a new table by the layout:
features only, or with the target column, which is then returned for scoring.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["TableError", "Table", "Layout", "read_table", "parse_delimiter", "fit_arrays", "predict_arrays"]

#: delimiters tried, in order of preference, when none is given
CANDIDATES = (",", "\t", ";", "|")
DELIMITER_NAMES = {"comma": ",", "tab": "\t", "\\t": "\t", "semicolon": ";", "pipe": "|", "space": " "}
#: rows read to choose the delimiter and detect the header
SAMPLE_ROWS = 200


class TableError(ValueError):
    """A file that cannot be read as a table of numbers; the message is one line that names the
    place (file, line, column) and the fix."""


def parse_delimiter(text):
    """The delimiter character of ``text`` (a character or a name such as ``tab``); None for None."""
    if text is None:
        return None
    delimiter = DELIMITER_NAMES.get(text.lower(), text)
    if len(delimiter) != 1 or delimiter in "\"\r\n":
        raise TableError(f"--delimiter {text!r}: give one character, e.g. ',' or ';', or one of "
                         f"{', '.join(DELIMITER_NAMES)}.")
    return delimiter


def is_number(cell):
    """Whether a cell reads as a float (nan and inf included; an empty cell does not)."""
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _opener(path):
    return gzip.open if path.name.lower().endswith(".gz") else open


def _encoding(path):
    """The text encoding of the file, from its first bytes (a byte-order mark); refuses binary
    files and UTF-16/32 without a byte-order mark."""
    try:
        with _opener(path)(path, "rb") as f:
            head = f.read(4096)
    except (gzip.BadGzipFile, EOFError) as err:
        raise TableError(f"{path}: not a gzip file ({err}); rename it without .gz if it is plain text.") from None
    if not head.strip():
        raise TableError(f"{path} is empty: it has no rows. Pass a file with a row per sample.")
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if b"\x00" in head:
        raise TableError(f"{path} is not UTF-8 text (it holds NUL bytes: UTF-16 without a byte-order "
                         f"mark, or a binary file); save it as UTF-8 CSV.")
    return "utf-8-sig"  # strips a UTF-8 byte-order mark, reads plain UTF-8 as is


def _records(path, encoding, delimiter):
    """(line number, stripped cells) of every row but the blank ones."""
    with _opener(path)(path, "rt", encoding=encoding, newline="") as f:
        reader = csv.reader(f, delimiter=delimiter, skipinitialspace=delimiter == " ")
        try:
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                yield reader.line_num, [cell.strip() for cell in row]
        except UnicodeDecodeError as err:
            raise TableError(f"{path}{_undecodable_line(path, encoding)}: not {encoding.replace('-sig', '')} "
                             f"text ({err.reason}: {err.object[err.start:err.start + 4]!r}); save the file "
                             f"as UTF-8.") from None
        except csv.Error as err:
            raise TableError(f"{path}, line {reader.line_num}: {err}; is the file a table of "
                             f"delimited text?") from None


def _undecodable_line(path, encoding):
    """", line N" of the first line of a UTF-8 file that does not decode (read again for the
    message: the decoder reads ahead in blocks); "" for other encodings."""
    if not encoding.startswith("utf-8"):
        return ""
    with _opener(path)(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return f", line {number}"
    return ""


def _sample(path, encoding, delimiter):
    return list(itertools.islice(_records(path, encoding, delimiter), SAMPLE_ROWS))


def _sniff(path, encoding):
    """The candidate delimiter that splits the sampled rows into one number (> 1) of fields,
    the one with the most numbers among its cells first; when none does, the one that splits the
    first row into the most fields (the rows that differ are then reported); "," by default."""
    best, widest = None, (1, ",")
    for rank, delimiter in enumerate(CANDIDATES):
        rows = [cells for _, cells in _sample(path, encoding, delimiter)]
        widths = {len(cells) for cells in rows}
        if len(widths) == 1 and min(widths) > 1:
            numbers = sum(is_number(c) for cells in rows[1:] for c in cells)
            if best is None or (numbers, -rank) > best[0]:
                best = ((numbers, -rank), delimiter)
        if rows and len(rows[0]) > widest[0]:
            widest = (len(rows[0]), delimiter)
    return widest[1] if best is None else best[1]


def _has_header(rows):
    """Whether the first of the sampled rows (lists of cells) is a header (see the module docstring)."""
    first, rest = rows[0], rows[1:]
    if not rest:
        return not all(is_number(c) for c in first)
    for j, cell in enumerate(first):
        below = [cells[j] for cells in rest if j < len(cells)]
        if not is_number(cell) and below and 2 * sum(map(is_number, below)) > len(below):
            return True
    if any(is_number(c) for c in first) or len(set(first)) < len(first):
        return False
    return all(cell not in {cells[j] for cells in rest if j < len(cells)} for j, cell in enumerate(first))


@dataclass
class Table:
    """A table read whole: ``names`` (the header, or None), and either ``values`` (every cell a
    number) or ``cells`` (strings) with the line number of each row in ``lines``."""

    path: Path
    encoding: str
    delimiter: str
    names: list | None
    n_rows: int
    n_columns: int
    header_line: int
    values: np.ndarray | None = None
    cells: np.ndarray | None = None
    lines: np.ndarray | None = None
    _text: dict = field(default_factory=dict, repr=False)

    def label(self, j):
        """How a message names column ``j``."""
        name = self.names[j] if self.names else None
        return f"column {j} ({name!r})" if name else f"column {j}"

    def line(self, i):
        """The line of the file that holds data row ``i``."""
        if self.lines is not None:
            return int(self.lines[i])
        records = _records(self.path, self.encoding, self.delimiter)
        return next(itertools.islice(records, i + (self.names is not None), None))[0]

    def is_text(self, j):
        """Whether column ``j`` is a text column: most of its non-empty cells are not numbers (a
        column of numbers with a few text cells is a column of numbers with errors)."""
        if j not in self._text:
            if self.cells is None:
                self._text[j] = False
            else:
                filled = [c for c in self.cells[:, j] if c]
                self._text[j] = 2 * sum(not is_number(c) for c in filled) > len(filled)
        return self._text[j]

    def text(self, j):
        """Column ``j``'s cells as strings."""
        if self.cells is None:
            return np.array([repr(float(v)) for v in self.values[:, j]])
        return self.cells[:, j]

    def numbers(self, j, role="feature", text_fix=None, empty=None):
        """Column ``j`` as float64; a TableError at its first cell that is not a number
        (``text_fix``: what the message of a text column says to do; ``empty``: the value of an
        empty cell, None to refuse them)."""
        if self.values is not None:
            return self.values[:, j]
        column = self.cells[:, j]
        try:
            return column.astype(np.float64)
        except ValueError:
            pass
        out = np.empty(len(column))
        for i, cell in enumerate(column.tolist()):
            try:
                out[i] = empty if empty is not None and not cell else float(cell)
            except ValueError:
                where = f"{self.path}, line {self.line(i)}: {self.label(j)}"
                if not cell:
                    raise TableError(f"{where} is empty; every {role} cell needs a number: fill in or "
                                     f"drop the rows with missing values.") from None
                if self.is_text(j):
                    fix = text_fix or ("pass --one-hot to encode text columns as 0/1 columns, or convert "
                                       "the column to numbers")
                    raise TableError(f"{where} holds text ({cell!r}); {fix}.") from None
                raise TableError(f"{where} holds {cell!r}, not a number; fix or drop that row.") from None
        return out


def read_table(path, *, delimiter=None, header=None, keep_text=False):
    """Read a delimited text file whole (see the module docstring). ``delimiter``: a character or
    a name (None: detected); ``header``: True, False or None (detected); ``keep_text``: keep the
    cells as written even when all are numbers (for columns read as categories)."""
    path = Path(path)
    encoding = _encoding(path)
    delimiter = parse_delimiter(delimiter) or _sniff(path, encoding)
    sample = _sample(path, encoding, delimiter)
    if not sample:
        raise TableError(f"{path} is empty: it has no rows. Pass a file with a row per sample.")
    has_header = _has_header([cells for _, cells in sample]) if header is None else bool(header)
    names = sample[0][1] if has_header else None
    header_line = sample[0][0] if has_header else 0
    width = len(sample[0][1])
    body = sample[1:] if has_header else sample
    common = dict(path=path, encoding=encoding, delimiter=delimiter, names=names, n_columns=width,
                  header_line=header_line)
    if not keep_text and body and all(len(cells) == width and all(map(is_number, cells)) for _, cells in body):
        try:  # every sampled cell a number: numpy's C reader, which raises on anything else
            values = np.loadtxt(path, delimiter=delimiter, skiprows=header_line, encoding=encoding,
                                comments=None, quotechar='"', ndmin=2, dtype=np.float64)
        except ValueError:
            values = None
        if values is not None and values.shape[1] == width:
            return Table(**common, n_rows=len(values), values=values)
    rows, lines = [], []
    where = "the header" if has_header else f"line {sample[0][0]}"
    for line, cells in _records(path, encoding, delimiter):
        if line <= header_line:
            continue
        if len(cells) != width:
            hint = ("" if delimiter == "," else f" (is {delimiter!r} the delimiter? --delimiter names it)")
            raise TableError(f"{path}, line {line}: {len(cells)} fields where {where} has {width}; every "
                             f"row needs the same columns: fix that row or quote fields that hold "
                             f"{delimiter!r}{hint}.")
        rows.append(cells)
        lines.append(line)
    if not rows:
        raise TableError(f"{path} has a header but no data rows. Pass a file with a row per sample.")
    return Table(**common, n_rows=len(rows), cells=np.array(rows, dtype=str), lines=np.array(lines))


# ----------------------------------------------------------------------------------------------
# the columns of a model


@dataclass
class Layout:
    """How a model's training file was read: its ``n_columns``, the ``target`` column's index,
    the header ``names`` (or None), the categories of each one-hot encoded text column (column
    index -> categories, one 0/1 feature each, in that order) and the kind of ``labels``
    ("number", "integer" or "text")."""

    n_columns: int
    target: int
    names: list | None = None
    one_hot: dict = field(default_factory=dict)
    labels: str = "number"

    @property
    def features(self):
        return [j for j in range(self.n_columns) if j != self.target]

    def to_json(self):
        return {"n_columns": self.n_columns, "target": self.target, "names": self.names,
                "one_hot": [[j, list(c)] for j, c in sorted(self.one_hot.items())], "labels": self.labels}

    @classmethod
    def from_json(cls, data):
        return cls(n_columns=int(data["n_columns"]), target=int(data["target"]), names=data.get("names"),
                   one_hot={int(j): list(c) for j, c in data.get("one_hot", [])},
                   labels=data.get("labels", "number"))

    @classmethod
    def plain(cls, n_features, labels="number"):
        """The layout of a model fitted elsewhere: its features, then the target."""
        return cls(n_columns=n_features + 1, target=n_features, labels=labels)

    def describe(self):
        """The columns in words, for messages."""
        named = self.names is not None
        target = repr(self.names[self.target]) if named else f"column {self.target}"
        return (f"{len(self.features)} feature columns (or {self.n_columns} with the target {target})")


def resolve_column(table, spec, option="--target"):
    """The index of the column named by ``spec``: a header name, else an index (0 is the first
    column, -1 the last)."""
    names = table.names or []
    if spec in names:
        if names.count(spec) > 1:
            raise TableError(f"{option} {spec!r}: {table.path} has {names.count(spec)} columns of that "
                             f"name; give the column's index (0 is the first, -1 the last).")
        return names.index(spec)
    try:
        index = int(spec)
    except ValueError:
        listing = (f"its columns are {', '.join(map(repr, names))}" if names else
                   "it has no header: give the column's index (0 is the first, -1 the last)")
        raise TableError(f"{option} {spec!r}: {table.path} has no column of that name; {listing}.") from None
    if not -table.n_columns <= index < table.n_columns:
        raise TableError(f"{option} {spec}: {table.path} has {table.n_columns} columns (indices 0 to "
                         f"{table.n_columns - 1}, or -1 for the last).")
    return index % table.n_columns


def _labels(table, j, kind):
    """The target column ``j`` read as ``kind`` labels; refuses empty cells and NaN."""
    what = f"{table.label(j)}, the target,"
    if kind == "text":
        y = table.text(j)
        empty = np.flatnonzero(y == "")
    else:
        y = table.numbers(j, role="target", empty=np.nan)
        empty = np.flatnonzero(np.isnan(y))
        if kind == "integer":
            y = y.astype(np.int64) if not len(empty) else y
    if len(empty):
        raise TableError(f"{table.path}, line {table.line(empty[0])}: {what} is empty or NaN ({len(empty)} "
                         f"row(s)); drop the rows without a label, or leave the target column out.")
    return y


def fit_arrays(table, *, target=None, one_hot=False, classifier=False):
    """``X, y, layout`` of a training table: the target is column ``target`` (a name or an
    index; default the last), the rest are features; text feature columns are one-hot encoded
    when ``one_hot``, else refused."""
    if table.n_columns < 2:
        raise TableError(f"{table.path} has 1 column; a training file needs feature columns and a target "
                         f"column (is the delimiter right? --delimiter names it).")
    t = table.n_columns - 1 if target is None else resolve_column(table, target)
    if classifier:
        kind = "text" if table.is_text(t) else "number"
    elif table.is_text(t):
        raise TableError(f"{table.path}: {table.label(t)}, the target, holds text "
                         f"({str(table.text(t)[0])!r}); a regressor needs numbers: pick a classifier, or "
                         f"name the target column with --target.")
    else:
        kind = "number"
    y = _labels(table, t, kind)
    if kind == "number" and classifier and np.all(y == np.round(y)) and np.all(np.abs(y) < 2**53):
        kind, y = "integer", y.astype(np.int64)
    layout = Layout(n_columns=table.n_columns, target=t, names=table.names, labels=kind)
    columns = []
    for j in layout.features:
        if one_hot and table.is_text(j):
            layout.one_hot[j] = sorted(set(table.text(j).tolist()))
            columns.append(_indicators(table.text(j), layout.one_hot[j]))
        else:
            columns.append(table.numbers(j)[:, None])
    return np.hstack(columns), y, layout


def _indicators(cells, categories):
    codes = {c: k for k, c in enumerate(categories)}
    out = np.zeros((len(cells), len(categories)))
    for i, cell in enumerate(cells.tolist()):
        k = codes.get(cell)
        if k is not None:
            out[i, k] = 1.0
    return out


def predict_arrays(table, layout, *, target=None):
    """``X, y, notes`` of a table read by a model's layout. The feature columns are found by
    their names when both files have headers that hold them, else by position: a table of the
    feature columns only, or of the training file's columns (the target among them). ``y`` is
    the target column when ``target`` names one or the table has it, else None. ``notes`` are
    one-line remarks (values of one-hot columns not seen in fitting, encoded as zeros)."""
    n_features = len(layout.features)
    t = None if target is None else resolve_column(table, target)
    names = table.names or []
    fit_names = layout.names or []
    wanted = [fit_names[j] for j in layout.features] if fit_names else []
    by_name = bool(wanted) and all(names.count(n) == 1 for n in wanted) and len(set(wanted)) == len(wanted)
    if by_name:
        sources = [names.index(n) for n in wanted]
        if t is None and names.count(fit_names[layout.target]) == 1:
            t = names.index(fit_names[layout.target])
        if t is not None and t in sources:
            raise TableError(f"--target {target}: {table.label(t)} is a feature column of the model.")
    elif t is not None:
        sources = [j for j in range(table.n_columns) if j != t]
        if len(sources) != n_features:
            raise TableError(f"{table.path} has {table.n_columns} columns: {len(sources)} besides the target "
                             f"{table.label(t)}, but the model reads {n_features} feature columns.")
    elif table.n_columns == n_features:
        sources = list(range(n_features))
    elif table.n_columns == layout.n_columns:
        t = layout.target
        sources = layout.features
    else:
        raise TableError(f"{table.path} has {table.n_columns} columns, but the model reads "
                         f"{layout.describe()}; check the delimiter (--delimiter) and the columns, or "
                         f"name the target column with --target.")
    notes = []
    if names and wanted and not by_name:
        notes.append(f"the header's names differ from the model's ({', '.join(wanted)}); the columns are "
                     f"read by position.")
    columns = []
    expected = ", ".join(wanted) if wanted else f"{n_features} columns of numbers"
    for j, source in zip(layout.features, sources):
        if j in layout.one_hot:
            cells = table.text(source)
            unseen = sorted(set(cells.tolist()) - set(layout.one_hot[j]))
            if unseen:
                notes.append(f"{table.label(source)}: {len(unseen)} value(s) not seen in fitting "
                             f"({', '.join(map(repr, unseen[:3]))}{', ...' if len(unseen) > 3 else ''}) "
                             f"encoded as all zeros.")
            columns.append(_indicators(cells, layout.one_hot[j]))
        else:
            fix = f"the model reads numbers there (its feature columns: {expected}); check the columns"
            columns.append(table.numbers(source, text_fix=fix)[:, None])
    y = None if t is None else _labels(table, t, "text" if layout.labels == "text" else "number")
    return np.hstack(columns), y, notes
