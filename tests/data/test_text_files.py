"""The one reading rule (data/text_files.py): UTF-8, a leading BOM dropped, and the first byte that is not UTF-8
named with its line and byte offset, the same by the whole-file reader and the streaming check, wherever the
stream's chunks happen to cut the file."""

import pytest

from bert_keras.data import DataFormatError
from bert_keras.data import text_files
from bert_keras.data.text_files import check_utf8, decode_utf8, open_text, read_text


def bad_file(tmp_path):
    good = "first line\nsecond: naïve “quotes”\n".encode("utf-8")
    data = b"\xef\xbb\xbf" + good + b"caf\xe9 au lait\nlast\n"
    path = tmp_path / "mixed.txt"
    path.write_bytes(data)
    return path, data.index(b"\xe9")


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 24])
def test_the_first_bad_byte_is_named_alike_by_both_readers(tmp_path, monkeypatch, chunk):
    path, at = bad_file(tmp_path)
    monkeypatch.setattr(text_files, "_CHUNK", chunk)           # chunk edges inside a 3-byte character too
    expected = rf"mixed\.txt, line 3: not UTF-8: byte 0xe9 at byte offset {at} \(invalid continuation byte\)"
    with pytest.raises(DataFormatError, match=expected):
        check_utf8(path)
    with pytest.raises(DataFormatError, match=expected):
        read_text(path)


def test_good_text_a_bom_and_a_cut_character(tmp_path):
    path = tmp_path / "good.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo \xe2\x80\x9cq\xe2\x80\x9d\n")
    assert read_text(path) == "one\r\ntwo “q”\n"
    with open_text(path) as f:
        assert list(f) == ["one\n", "two “q”\n"]
    check_utf8(path)
    (tmp_path / "cut.txt").write_bytes(b"abc\n\xe2\x80")              # the file ends inside a character
    with pytest.raises(DataFormatError, match=r"line 2: not UTF-8: byte 0xe2 at byte offset 4"):
        check_utf8(tmp_path / "cut.txt")
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_text(tmp_path / "missing.txt")


def test_a_piece_of_a_file_counts_its_lines_from_the_file(tmp_path):
    path, at = bad_file(tmp_path)
    data = path.read_bytes()
    start = data.index(b"caf")
    with pytest.raises(DataFormatError, match=rf"line 3: not UTF-8: byte 0xe9 at byte offset {at}"):
        decode_utf8(data[start:], path, offset=start, line=None)
