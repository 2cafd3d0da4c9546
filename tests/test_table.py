"""kernelscale.data.table: delimited text read as people write it (encodings, delimiters,
headers, quotes, text columns), and the columns a model was fitted on read back the same way."""

import gzip

import numpy as np
import pytest

from kernelscale.data.table import Layout, TableError, fit_arrays, predict_arrays, read_table


def write(path, text, encoding="utf-8"):
    path.write_text(text, encoding=encoding)
    return path


ROWS = "1.5,2,3\n4,5.25,6\n7,8,9.125\n"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32"])
@pytest.mark.parametrize("header", [True, False])
def test_encodings_and_headers(tmp_path, encoding, header):
    text = ("x,y,z\n" if header else "") + ROWS
    table = read_table(write(tmp_path / "t.csv", text, encoding))
    assert table.names == (["x", "y", "z"] if header else None)
    assert table.values is not None  # all numbers: numpy's reader
    np.testing.assert_array_equal(table.values, np.array([[1.5, 2, 3], [4, 5.25, 6], [7, 8, 9.125]]))


@pytest.mark.parametrize("delimiter, name", [("\t", None), (";", None), ("|", None), (";", ";"), ("\t", "tab")])
def test_delimiters_are_detected_or_named(tmp_path, delimiter, name):
    table = read_table(write(tmp_path / "t.txt", ROWS.replace(",", delimiter)), delimiter=name)
    assert table.delimiter == delimiter and table.n_columns == 3 and table.n_rows == 3


def test_the_fast_and_the_slow_reader_agree(tmp_path):
    text = "a,b,c\n" + "".join(f"{i * 0.1},{-i},{i ** 2 * 1e-3}\n" for i in range(50))
    fast = read_table(write(tmp_path / "t.csv", text))
    slow = read_table(tmp_path / "t.csv", keep_text=True)
    assert fast.values is not None and slow.cells is not None
    for j in range(3):
        np.testing.assert_array_equal(fast.numbers(j), slow.numbers(j))


def test_quoted_fields_blank_lines_spaces_and_gzip(tmp_path):
    text = 'name,x,y\n"Smith, J",1, 2\n\n"Doe, A", 3 ,4\n'
    with gzip.open(tmp_path / "t.csv.gz", "wt") as f:
        f.write(text)
    table = read_table(tmp_path / "t.csv.gz")
    assert table.names == ["name", "x", "y"] and table.n_rows == 2
    assert table.text(0).tolist() == ["Smith, J", "Doe, A"]
    np.testing.assert_array_equal(table.numbers(1), [1, 3])
    assert table.line(1) == 4  # the blank line counted


@pytest.mark.parametrize("text, header", [
    ("x1,x2,y\n1,2,3\n", True),            # names above numbers
    (",a,b\n0,1,2\n1,3,4\n", True),         # an unnamed index column (pandas' to_csv)
    ("cut,color\nIdeal,E\nGood,E\n", True),  # all text, names not repeated below
    ("Ideal,E\nGood,E\nIdeal,F\n", False),  # all text, "Ideal" and "E" repeat: data
    ("1,2\n3,4\n", False),
    ("Ideal,1\nGood,2\n", False),           # text above text, a number above numbers
])
def test_header_detection(tmp_path, text, header):
    assert (read_table(write(tmp_path / "t.csv", text)).names is not None) == header


def test_header_can_be_forced(tmp_path):
    path = write(tmp_path / "t.csv", "Ideal,E\nGood,E\n")
    assert read_table(path, header=True).names == ["Ideal", "E"]
    assert read_table(write(tmp_path / "n.csv", "x,y\n1,2\n"), header=False).cells[0].tolist() == ["x", "y"]


@pytest.mark.parametrize("text, message", [
    ("", r"is empty"),
    ("\n\n", r"is empty"),
    ("a,b\n", r"a header but no data rows"),
    ("a,b\n1,2\n3\n", r"line 3: 1 fields where the header has 2"),
    ("1;2\n3;4;5\n", r"line 2: 3 fields where line 1 has 2"),
])
def test_malformed_tables(tmp_path, text, message):
    with pytest.raises(TableError, match=message):
        read_table(write(tmp_path / "t.csv", text))


def test_bytes_that_are_not_utf8(tmp_path):
    (tmp_path / "latin1.csv").write_bytes("a,b\ncafé,1\n".encode("latin-1"))
    with pytest.raises(TableError, match=r"line 2: not utf-8 text .*save the file as UTF-8"):
        read_table(tmp_path / "latin1.csv")
    (tmp_path / "nul.csv").write_bytes("a,b\n1,2\n".encode("utf-16-le"))
    with pytest.raises(TableError, match=r"not UTF-8 text \(it holds NUL bytes"):
        read_table(tmp_path / "nul.csv")


def test_text_columns_and_text_in_number_columns(tmp_path):
    table = read_table(write(tmp_path / "t.csv", "a,b,c,d\n1,x,2,1\n2,y,,2\n3,z,3,oops\n4,x,5,4\n"))
    assert table.is_text(1) and not table.is_text(0) and not table.is_text(2) and not table.is_text(3)
    with pytest.raises(TableError, match=r"line 2: column 1 \('b'\) holds text \('x'\); pass --one-hot"):
        table.numbers(1)
    with pytest.raises(TableError, match=r"line 3: column 2 \('c'\) is empty; every feature cell needs a number"):
        table.numbers(2)
    np.testing.assert_array_equal(table.numbers(2, empty=np.nan), [2, np.nan, 3, 5])
    with pytest.raises(TableError, match=r"line 4: column 3 \('d'\) holds 'oops', not a number; fix or drop"):
        table.numbers(3)


def test_fit_and_predict_by_the_layout(tmp_path):
    train = read_table(write(tmp_path / "train.csv", "cut,carat,price\nIdeal,1,10\nGood,2,20\nIdeal,3,30\n"),
                       keep_text=True)
    X, y, layout = fit_arrays(train, one_hot=True)
    np.testing.assert_array_equal(X, [[0, 1, 1], [1, 0, 2], [0, 1, 3]])  # Good, Ideal, carat
    np.testing.assert_array_equal(y, [10, 20, 30])
    layout = Layout.from_json(layout.to_json())
    assert layout.one_hot == {0: ["Good", "Ideal"]} and layout.target == 2
    # the columns by name, in another order, with the target; an unseen category
    new = read_table(write(tmp_path / "new.csv", "price,carat,cut\n5,4,Fair\n6,5,Good\n"), keep_text=True)
    X2, y2, notes = predict_arrays(new, layout)
    np.testing.assert_array_equal(X2, [[0, 0, 4], [1, 0, 5]])
    np.testing.assert_array_equal(y2, [5, 6])
    assert notes == ["column 2 ('cut'): 1 value(s) not seen in fitting ('Fair') encoded as all zeros."]
    # features only, without a header: by position
    bare = read_table(write(tmp_path / "bare.csv", "Good,7\n"), keep_text=True, header=False)
    X3, y3, _ = predict_arrays(bare, layout)
    assert y3 is None
    np.testing.assert_array_equal(X3, [[1, 0, 7]])
    # a header of other names: by position, said in a note
    renamed = read_table(write(tmp_path / "renamed.csv", "kind,weight\nGood,7\n"), keep_text=True)
    X4, _, notes = predict_arrays(renamed, layout)
    np.testing.assert_array_equal(X4, X3)
    assert notes == ["the header's names differ from the model's (cut, carat); the columns are read by position."]
    with pytest.raises(TableError, match=r"has 1 columns, but the model reads 2 feature columns \(or 3 with "
                                         r"the target 'price'\)"):
        predict_arrays(read_table(write(tmp_path / "one.csv", "1\n2\n")), layout)


def test_classifier_labels(tmp_path):
    table = read_table(write(tmp_path / "t.csv", "x,label\n1,1\n2,0\n3,1\n"))
    _, y, layout = fit_arrays(table, classifier=True)
    assert y.dtype == np.int64 and layout.labels == "integer"
    table = read_table(write(tmp_path / "s.csv", "label,x\nyes,1\nno,2\n"))
    _, y, layout = fit_arrays(table, target="label", classifier=True)
    assert y.tolist() == ["yes", "no"] and layout.labels == "text" and layout.target == 0
    with pytest.raises(TableError, match=r"the target, holds text \('yes'\); a regressor needs numbers"):
        fit_arrays(table, target="label")
