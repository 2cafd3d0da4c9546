"""Benchmark datasets: a registry, loaders for .npz / svmlight / IDX / CSV files, and the sinc data.

Where datasets are looked for, in this order (the first directory holding the file wins):

1. ``$KERNELSCALE_DATA`` (one directory, or several separated by ``os.pathsep``);
2. ``~/.cache/kernelscale``;
3. ``shared/data`` beside a checkout: for every parent P of this module's source file (an editable
   / src-layout install) and of the current working directory, ``P/shared/data``. A checkout at
   ``/work/main`` thus finds ``/work/shared/data``. Set ``SEARCH_BESIDE_CHECKOUT = False`` to
   switch this step off.

Passing ``data_home=`` to a function searches that directory only.

Each dataset is one ``np.savez_compressed`` archive (see ``DATASETS`` for the arrays). Datasets
with an official train/test split load as ``X_train, y_train, X_test, y_test``; the others load as
``X, y`` and callers split them with a seeded :func:`split_dataset` (paper 1 uses random
3000/1177 splits of abalone and 350/156 of boston: ``PAPER1_SPLITS``).
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import numbers
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..base.validation import check_positive

__all__ = [
    "DATASETS",
    "DatasetInfo",
    "DatasetNotFoundError",
    "ENV_VAR",
    "PAPER1_SPLITS",
    "data_dirs",
    "find_dataset",
    "load_dataset",
    "split_dataset",
    "verify_dataset",
    "load_npz",
    "load_svmlight",
    "load_idx",
    "load_file",
    "make_sinc",
    "coulomb_features",
]

from .virtual_digits import VirtualDigits  # noqa: E402  (MNIST8M-style virtual examples)
__all__ += ["VirtualDigits"]

logger = logging.getLogger(__name__)

ENV_VAR = "KERNELSCALE_DATA"
#: step 3 of the search order; tests switch it off to simulate a machine without the data
SEARCH_BESIDE_CHECKOUT = True
#: (n_train, n_test) of the random splits used in paper 1 (docs/algorithms.md section 1.5)
PAPER1_SPLITS = {"abalone": (3000, 1177), "boston": (350, 156)}

_README = "shared/data/README.md of the kernelscale project"


@dataclass(frozen=True)
class DatasetInfo:
    """What a registered dataset file holds.

    ``arrays`` is a tuple of (name, shape, dtype) triples as stored in the file; ``n_samples``
    counts train + test rows; ``n_features`` is the number of columns of X as
    :func:`load_dataset` returns it (qm7: 23 * 23 = 529 once flattened).
    """

    name: str
    filename: str
    task: str  # "regression", "binary" or "multiclass"
    arrays: tuple
    official_split: bool
    n_samples: int
    n_features: int
    description: str
    source: str
    sha256: str

    @property
    def array_specs(self):
        """{array name: (shape, dtype)}."""
        return {name: (shape, np.dtype(dtype)) for name, shape, dtype in self.arrays}


def _split_arrays(n_train, n_test, n_features, x_dtype):
    return (
        ("X_train", (n_train, n_features), x_dtype),
        ("y_train", (n_train,), "int64"),
        ("X_test", (n_test, n_features), x_dtype),
        ("y_test", (n_test,), "int64"),
    )


def _table_arrays(n, n_features):
    return (
        ("X", (n, n_features), "float64"),
        ("y", (n,), "float64"),
        ("feature_names", (n_features,), "U"),
    )


DATASETS = {
    "mnist": DatasetInfo(
        "mnist", "mnist.npz", "multiclass", _split_arrays(60000, 10000, 784, "uint8"), True,
        70000, 784,
        "MNIST handwritten digits, 28x28 uint8 pixels 0..255 flattened, labels 0..9.",
        "LeCun, Bottou, Bengio & Haffner 1998 (yann.lecun.com/exdb/mnist IDX files; the shared "
        "copy was built from GitHub fgnt/mnist and PaulusDeGross/OrionAI)",
        "f448f3203781874116c54cbb4289f90ae5171fb82eaebc5c2f5c1b82aa91abee",
    ),
    "usps": DatasetInfo(
        "usps", "usps.npz", "multiclass", _split_arrays(7291, 2007, 256, "float32"), True,
        9298, 256,
        "USPS digits, 16x16 float32 pixels in [0, 1] (use 2*X - 1 for the usual [-1, 1]).",
        "Hull 1994, as distributed with Hastie/Tibshirani/Friedman 'Elements of Statistical "
        "Learning' (zip.train/zip.test; the shared copy is GitHub "
        "niuers/Learning-From-Data-A-Short-Course data/usps.h5)",
        "da667e0b3ffb895959d7f2c54a0238ca09c756f8742296a19c288cc0e9aaa49a",
    ),
    "abalone": DatasetInfo(
        "abalone", "abalone.npz", "regression", _table_arrays(4177, 10), False,
        4177, 10,
        "UCI Abalone: one-hot sex + 7 measurements, target = rings (1..29).",
        "UCI Machine Learning Repository 'Abalone' (Nash et al. 1994; abalone.data)",
        "0c487d1927d15dcdba42d0d01632938f21801a6bd631dd2e23d66c86d533af43",
    ),
    "boston": DatasetInfo(
        "boston", "boston.npz", "regression", _table_arrays(506, 13), False,
        506, 13,
        "Boston housing (Harrison & Rubinfeld 1978), target = MEDV; feature B is ethically "
        "problematic, use only for comparison with older papers.",
        "UCI repository housing.data (Harrison & Rubinfeld 1978)",
        "dd31ee376d4030dab6a20a67e86cf29960540eb0cf4a3cd9e00e9b93e811bedd",
    ),
    "adult": DatasetInfo(
        "adult", "adult.npz", "binary", _split_arrays(32561, 16281, 123, "uint8"), True,
        48842, 123,
        "UCI Adult as LIBSVM a9a/a9a.t: 123 binary features, labels -1/+1.",
        "LIBSVM datasets page, files a9a and a9a.t (Kohavi 1996; Platt 1998)",
        "ebf57509f758ea86328724bf965940498b8ca7403cf1afb394fc0269bab8ce1d",
    ),
    "cadata": DatasetInfo(
        "cadata", "cadata.npz", "regression", _table_arrays(20640, 8), False,
        20640, 8,
        "California housing, raw StatLib block-group totals, target = median house value ($).",
        "StatLib / L. Torgo cal_housing.data (Pace & Barry 1997)",
        "3c1b6e53cd5bd67b5deab9c3d7e2f5d074294e0c349cb27f714165f83be1fec0",
    ),
    "qm7": DatasetInfo(
        "qm7", "qm7.npz", "regression",
        (
            ("X", (7165, 23, 23), "float32"),
            ("y", (7165,), "float64"),
            ("Z", (7165, 23), "uint8"),
            ("R_angstrom", (7165, 23, 3), "float32"),
        ),
        False, 7165, 529,
        "QM7 Coulomb matrices (rebuilt, no official folds), target = atomization energy "
        "(kcal/mol).",
        "quantum-machine.org qm7 (Blum & Reymond 2009; Rupp et al. 2012); the shared copy is "
        "rebuilt from GitHub SFdS-atelier-3/block-1 qm7.npz",
        "dc893f03af0f6f5f33242888cc0b324502ac82ae5f535cc115ed8392728f8c9e",
    ),
}


class DatasetNotFoundError(FileNotFoundError):
    """A registered dataset file is in none of the searched directories."""


# ----------------------------------------------------------------------------------------------
# locating files


def _beside_checkout(start):
    """Existing ``P/shared/data`` directories for P = start and each of its parents."""
    start = Path(start).resolve()
    candidates = [p / "shared" / "data" for p in (start, *start.parents)]
    return [d for d in candidates if d.is_dir()]


def data_dirs(data_home=None):
    """The directories searched for dataset files, in search order (see the module docstring)."""
    if data_home is not None:
        return [Path(data_home).expanduser()]
    dirs = []
    env = os.environ.get(ENV_VAR, "")
    dirs += [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    dirs.append(Path.home() / ".cache" / "kernelscale")
    if SEARCH_BESIDE_CHECKOUT:
        dirs += _beside_checkout(Path(__file__).parent)
        dirs += _beside_checkout(Path.cwd())
    unique = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def _info(name):
    if isinstance(name, DatasetInfo):
        return name
    key = str(name).lower()
    if key not in DATASETS:
        raise ValueError(
            f"name={name!r} is not a registered dataset; choose one of {', '.join(DATASETS)}."
        )
    return DATASETS[key]


def find_dataset(name, data_home=None):
    """Return the path of a registered dataset's file, or raise DatasetNotFoundError saying
    which directories were searched, what to set and where the data comes from."""
    info = _info(name)
    searched = data_dirs(data_home)
    for d in searched:
        path = d / info.filename
        if path.is_file():
            return path
    where = "\n".join(f"  - {d}" for d in searched) or "  (none)"
    arrays = ", ".join(f"{a} {tuple(s)} {np.dtype(t).name if t != 'U' else 'unicode'}"
                       for a, s, t in info.arrays)
    raise DatasetNotFoundError(
        f"Dataset {info.name!r} not found: no file {info.filename} in any of these directories:\n"
        f"{where}\n"
        f"Put {info.filename} (an np.savez archive with arrays {arrays}) in one of them, or set "
        f"the environment variable {ENV_VAR} to the directory holding it "
        f"(e.g. export {ENV_VAR}=/path/to/data). "
        f"Download it from: {info.source}. How the file is built from the download is described "
        f"in {_README}."
    )


def _sha256(path, chunk=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def verify_dataset(name, data_home=None):
    """Check a dataset file's SHA-256 against the registry; return its path or raise ValueError."""
    info = _info(name)
    path = find_dataset(info, data_home)
    digest = _sha256(path)
    if digest != info.sha256:
        raise ValueError(
            f"{path} has SHA-256 {digest}, but {info.name!r} should have {info.sha256}: the file "
            f"is corrupt or a different version; download it again (source: {info.source})."
        )
    return path


# ----------------------------------------------------------------------------------------------
# registered datasets


def load_dataset(name, data_home=None, dtype=None, *, flatten=True, verify=False, chunks=None):
    """Load a registered dataset as a :class:`sklearn.utils.Bunch`.

    Parameters
    ----------
    name : str
        A key of ``DATASETS`` ("mnist", "usps", "abalone", "boston", "adult", "cadata", "qm7").
    data_home : path, optional
        Search only this directory instead of the default search order.
    dtype : numpy dtype, optional
        Cast the X arrays to it (e.g. ``np.float32``: mnist and adult are stored as uint8).
        None keeps the stored dtypes. Targets are never cast.
    flatten : bool, default=True
        qm7 only: reshape the (7165, 23, 23) Coulomb matrices to (7165, 529); False keeps them 3-d.
    verify : bool, default=False
        Check the file's SHA-256 first (reads the whole file once more).
    chunks : None, "auto" or int, optional
        Return X and y arrays as dask arrays in row chunks of this many rows (see
        :func:`load_file`; the registered files are compressed and small, so they are read whole
        first).

    Returns
    -------
    Bunch with ``X_train, y_train, X_test, y_test`` when the dataset has an official split
    (``info.official_split``), else ``X, y`` (split them with :func:`split_dataset`); plus every
    other stored array (``feature_names``, qm7's ``Z`` and ``R_angstrom``), ``info`` (the
    DatasetInfo), ``path`` and ``DESCR``.
    """
    info = _info(name)
    path = verify_dataset(info, data_home) if verify else find_dataset(info, data_home)
    arrays = load_npz(path)
    for key, (shape, want) in info.array_specs.items():
        got = arrays.get(key)
        ok = got is not None and got.shape == shape and (
            got.dtype.kind == "U" if want.kind == "U" else got.dtype == want
        )
        if not ok:
            found = None if got is None else (got.shape, str(got.dtype))
            raise ValueError(
                f"{path}: array {key!r} should be {shape} {want}, found {found}; the file is not "
                f"the registered {info.name!r} dataset; check it with "
                f"verify_dataset({info.name!r})."
            )
    x_keys = ("X_train", "X_test") if info.official_split else ("X",)
    for key in x_keys:
        if info.name == "qm7" and flatten:
            arrays[key] = arrays[key].reshape(arrays[key].shape[0], -1)
        if dtype is not None:
            arrays[key] = arrays[key].astype(dtype, copy=False)
    if chunks is not None:
        from .lazy_files import in_chunks, row_chunks

        row_chunks(1, 1, chunks)
        for key in x_keys:
            y_key = "y" + key[1:]
            arrays[key] = in_chunks(arrays[key], chunks)
            arrays[y_key] = in_chunks(arrays[y_key], max(1, arrays[key].chunks[0][0]))  # X's row chunks
    return Bunch(**arrays, info=info, path=path, DESCR=info.description)


def split_dataset(data, n_train, n_test=None, random_state=None):
    """Seeded random train/test split of a Bunch holding ``X, y`` (or of an ``(X, y)`` pair).

    The rows are permuted with ``random_state``; the first ``n_train`` are the training set and
    the next ``n_test`` (default: all the rest) the test set. Returns
    ``X_train, y_train, X_test, y_test`` (the order of :func:`make_sinc`).
    """
    if isinstance(data, Bunch) or isinstance(data, dict):
        if "X" not in data:
            raise ValueError(
                "split_dataset needs a dataset without an official split (arrays X and y); this "
                "one already has X_train/X_test: use them."
            )
        X, y = data["X"], data["y"]
    else:
        X, y = data
    n = X.shape[0]
    if len(y) != n:
        raise ValueError(f"X has {n} rows but y has {len(y)}; pass matching X and y.")
    check_positive(n_train, "n_train", integer=True)
    n_test = n - n_train if n_test is None else n_test
    check_positive(n_test, "n_test", integer=True, allow_zero=True)
    if n_train + n_test > n:
        raise ValueError(
            f"n_train + n_test = {n_train + n_test} exceeds the {n} samples; pass smaller sizes."
        )
    perm = check_random_state(random_state).permutation(n)
    tr, te = perm[:n_train], perm[n_train:n_train + n_test]
    return X[tr], y[tr], X[te], y[te]


# ----------------------------------------------------------------------------------------------
# file loaders


def load_npz(path):
    """All arrays of an .npz archive as a dict (read eagerly, never unpickling)."""
    with np.load(path, allow_pickle=False) as f:
        return {key: f[key] for key in f.files}


def load_svmlight(path, n_features=None, *, dense=False, zero_based="auto", dtype=np.float64):
    """Read a svmlight / LIBSVM file (plain, .gz or .bz2) with scikit-learn's parser.

    Returns ``(X, y)``: X a scipy.sparse CSR matrix, or a dense array when ``dense=True``.
    ``n_features`` fixes the number of columns (needed for a test file whose highest feature
    index is absent). LIBSVM indices are 1-based; ``zero_based="auto"`` is scikit-learn's
    detection (1-based unless an index 0 occurs).
    """
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(
        str(path), n_features=n_features, dtype=dtype, zero_based=zero_based
    )
    if dense:
        X = X.toarray()
    return X, y


# IDX type codes (third byte of the magic number) and their big-endian numpy dtypes
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def load_idx(path):
    """Read an IDX file (the MNIST format), gzip-compressed or not, into a native-endian array.

    Format: magic number 0x00 0x00 <type code> <ndim>, then ndim big-endian int32 sizes, then
    the data in C order, big-endian. Type codes: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64.
    """
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise ValueError(
            f"{path} is not an IDX file: it must start with 0x00 0x00 then a type code in "
            f"{sorted(hex(c) for c in _IDX_TYPES)}, found {raw[:4].hex(' ')}."
        )
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: IDX header truncated ({len(raw)} bytes for {ndim} dimensions).")
    shape = tuple(int(s) for s in np.frombuffer(raw, ">i4", count=ndim, offset=4))
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != size:
        raise ValueError(
            f"{path}: IDX header says shape {shape} ({size} data bytes) but the file holds "
            f"{len(raw) - header}; the file is truncated or corrupt."
        )
    data = np.frombuffer(raw, dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


_SVMLIGHT_EXT = (".svm", ".svmlight", ".libsvm", ".txt")
_IDX_EXT = (".idx", "-ubyte", ".ubyte")


def load_file(path, *, part=None, n_features=None, chunks=None, max_memory=None):
    """Load ``(X, y)`` from a data file, choosing the reader by extension (the CLI's loader).

    - ``.npz``: arrays ``X`` and ``y`` (y may be absent: None); with ``part="train"`` or
      ``"test"``, ``X_train``/``y_train`` or ``X_test``/``y_test`` (registered split datasets).
    - ``.npy``: one array, returned as X, and y = None.
    - ``.svm``, ``.svmlight``, ``.libsvm``, ``.txt``: svmlight/LIBSVM, returned dense.
    - ``.csv``: comma-separated numbers, the target in the LAST column; a non-numeric first
      line is taken as a header and skipped.
    - IDX (``.idx``, ``*-ubyte``): one array, returned as X with each sample flattened to a row,
      and y = None (read labels with :func:`load_idx`).

    A trailing ``.gz`` is allowed on all but .npz and .npy. X is returned as stored (use
    ``as_float_array`` or an estimator to convert).

    ``chunks`` (None, "auto" or a number of rows) returns dask arrays in row chunks instead, for
    files larger than memory: ``.npy``, uncompressed ``.npz`` members and uncompressed IDX files
    are then read one chunk per task, at the chunk's offset, never whole ("auto": dask's
    ``array.chunk-size`` of rows, 128 MiB by default). A compressed ``.npz`` member is read whole
    within ``max_memory`` (default: the memory budget) and refused beyond it; the text formats
    are read whole (:mod:`kernelscale.data.lazy_files`).
    """
    from . import lazy_files

    path = Path(path)
    name = path.name.lower()
    lazy = chunks is not None
    if lazy:
        lazy_files.row_chunks(1, 1, chunks)  # a bad chunks fails before any reading
    compressed = name.endswith((".gz", ".bz2"))
    if compressed:
        name = name.rsplit(".", 1)[0]
    if name.endswith(".npz"):
        with np.load(path, allow_pickle=False) as f:
            keys = list(f.files)
        x_key, y_key = ("X", "y") if part is None else (f"X_{part}", f"y_{part}")
        if x_key not in keys:
            hint = " (this file has a train/test split: pass part='train' or 'test')" if (
                "X_train" in keys) else ""
            raise ValueError(f"{path} has no array {x_key!r}; it holds {sorted(keys)}{hint}.")
        if lazy:
            from ..ops.memory import parse_memory

            budget = parse_memory(max_memory)
            X = lazy_files.npz_rows(path, x_key, chunks, budget)
            y = lazy_files.npz_rows(path, y_key, max(1, X.chunks[0][0]), budget) if y_key in keys else None  # X's chunks
            return X, y
        arrays = load_npz(path)
        return arrays[x_key], arrays.get(y_key)
    if name.endswith(".npy") and not compressed:
        if lazy:
            return lazy_files.npy_rows(path, chunks), None
        return np.load(path, allow_pickle=False), None
    if name.endswith(_IDX_EXT) and lazy and not compressed:
        return _idx_rows(path, chunks), None
    X, y = _load_whole(path, name, n_features)
    if not lazy:
        return X, y
    X = lazy_files.in_chunks(X, chunks)
    return X, lazy_files.in_chunks(y, max(1, X.chunks[0][0]))  # y in X's row chunks


def _load_whole(path, name, n_features):
    """(X, y) of a file read whole by the reader of its extension (``name``, lower case, without .gz)."""
    if name.endswith(_SVMLIGHT_EXT):
        return load_svmlight(path, n_features=n_features, dense=True)
    if name.endswith(".csv"):
        return _load_csv(path)
    if name.endswith(_IDX_EXT):
        data = load_idx(path)
        return data.reshape(data.shape[0], -1), None
    raise ValueError(
        f"cannot tell the format of {path} from its extension; use .npz, .npy, "
        f"{'/'.join(_SVMLIGHT_EXT)} (svmlight), .csv (target in the last column) or an IDX file "
        f"(.idx, *-ubyte); all but .npz and .npy may be gzipped."
    )


def _idx_rows(path, chunks):
    """An uncompressed IDX file as a dask array of flattened rows, read chunk by chunk."""
    from .lazy_files import raw_rows

    with open(path, "rb") as f:
        head = f.read(4)
        if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in _IDX_TYPES:
            raise ValueError(f"{path} is not an IDX file: it must start with 0x00 0x00 then a type code.")
        shape = tuple(int(s) for s in np.frombuffer(f.read(4 * head[3]), ">i4"))
    return raw_rows(path, 4 + 4 * len(shape), np.dtype(_IDX_TYPES[head[2]]), shape, chunks, flatten=True)


def _load_csv(path):
    opener = gzip.open if str(path).lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig") as f:  # a byte-order mark is not a header
        first = f.readline()
    try:
        [float(v) for v in first.strip().split(",")]
        skip = 0
    except ValueError:
        skip = 1
    data = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2, encoding="utf-8-sig")
    if data.shape[1] < 2:
        raise ValueError(
            f"{path} has {data.shape[1]} column(s); a CSV needs feature columns, then the target."
        )
    return data[:, :-1], data[:, -1]


# ----------------------------------------------------------------------------------------------
# synthetic data


def _sinc_norm(X):
    """sin|x| / |x| with the value 1 at x = 0 (np.sinc(t) = sin(pi t) / (pi t))."""
    return np.sinc(np.linalg.norm(X, axis=1) / np.pi)


def make_sinc(n_train=1000, n_test=1000, snr_db=10, random_state=None):
    """The sinc regression problem of paper 1 (docs/algorithms.md section 1.5).

    x is uniform in [-5, 5]^2 and y = sin|x| / |x|. The training targets get Gaussian noise of
    power mean(y_train_clean^2) / 10^(snr_db / 10); the test targets are clean. Draws, in order:
    X_train, X_test, then the noise. ``snr_db=np.inf`` gives noise-free training targets.

    Returns ``X_train (n_train, 2), y_train, X_test (n_test, 2), y_test``, all float64.
    """
    check_positive(n_train, "n_train", integer=True)
    check_positive(n_test, "n_test", integer=True, allow_zero=True)
    if isinstance(snr_db, bool) or not isinstance(snr_db, numbers.Real) or np.isnan(snr_db) or (
        snr_db == -np.inf
    ):
        raise ValueError(f"snr_db must be a real number of decibels (or inf), got {snr_db!r}.")
    rng = check_random_state(random_state)
    X_train = rng.uniform(-5.0, 5.0, size=(n_train, 2))
    X_test = rng.uniform(-5.0, 5.0, size=(n_test, 2))
    y_clean = _sinc_norm(X_train)
    noise_power = np.mean(y_clean**2) / 10.0 ** (snr_db / 10.0)
    y_train = y_clean + rng.normal(0.0, np.sqrt(noise_power), size=n_train)
    return X_train, y_train, X_test, _sinc_norm(X_test)


def coulomb_features(C, noise=0.0, random_state=None):
    """Atom-order-free inputs from Coulomb matrices: the upper triangles of the matrices with
    their atoms ordered by decreasing row norm.

    ``noise=0`` is the sorted Coulomb matrix (Rupp et al. 2012): two orderings of the same
    molecule's atoms give the same row. ``noise > 0`` draws random Coulomb matrices (Montavon et
    al. 2012): the row norms are perturbed by N(0, noise^2) before sorting, so each call gives
    another plausible ordering. Streaming fresh draws to a learner is QM7's "virtual examples"
    (paper 2, docs/algorithms.md section 2.5); averaging a model's predictions over several draws of a
    test molecule is the matching prediction. Padding atoms (all-zero rows) stay last.

    Parameters
    ----------
    C : array of shape (n, a, a)
        Symmetric Coulomb matrices, e.g. ``load_dataset("qm7", flatten=False).X``.
    noise : float, default=0.0
        Standard deviation of the row-norm perturbation (Montavon et al. use 1).
    random_state : int, RandomState, Generator or None
        Source of the perturbation (unused when ``noise=0``).

    Returns
    -------
    array of shape (n, a (a + 1) / 2): the upper triangles, row by row, in C's floating dtype
    (float64 for integer input).
    """
    C = np.asarray(C)
    if C.ndim != 3 or C.shape[1] != C.shape[2]:
        raise ValueError(f"C must be a stack of square matrices, shape (n, a, a); got shape {C.shape}. "
                         "Pass load_dataset('qm7', flatten=False).X.")
    if not np.issubdtype(C.dtype, np.floating):
        C = C.astype(np.float64)
    if not np.all(np.isfinite(C)):
        raise ValueError("C contains NaN or infinity; Coulomb matrices are finite (0 for padding atoms).")
    check_positive(noise, "noise", allow_zero=True)
    norms = np.linalg.norm(C.astype(np.float64, copy=False), axis=2)
    key = norms
    if noise > 0:
        rng = random_state if isinstance(random_state, np.random.Generator) else check_random_state(random_state)
        key = norms + rng.normal(scale=noise, size=norms.shape)
    key = np.where(norms > 0, key, -np.inf)
    order = np.argsort(-key, axis=1, kind="stable")
    rows, cols = np.triu_indices(C.shape[1])
    # entry (i, j) of the reordered matrix is C[order[i], order[j]]
    return C[np.arange(C.shape[0])[:, None], order[:, rows], order[:, cols]]
