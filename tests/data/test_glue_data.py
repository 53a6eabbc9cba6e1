"""GLUE TSV readers: the real SST-2 / MRPC files and inline fixtures of the other layouts."""

import pytest

from bert_keras.data import DataFormatError, TextExample, read_glue


def _write(tmp_path, name, text, bom=False):
    path = tmp_path / name
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


@pytest.mark.parametrize("split,count,positives", [("train", 67349, 37569), ("dev", 872, 444), ("test", 1821, 0)])
def test_sst2_real(shared_data, split, count, positives):
    examples, labels = read_glue("sst-2", shared_data / "SST-2" / f"{split}.tsv")
    assert labels == ["0", "1"]
    assert len(examples) == count
    assert sum(e.label == 1 for e in examples) == positives
    if split == "train":
        assert examples[0].text_a == "hide new secretions from the parental units " and examples[0].label == 0
    if split == "dev":
        assert examples[0].text_a == "it 's a charming and often affecting journey . " and examples[0].label == 1
    if split == "test":
        assert all(e.label is None and e.text_b is None for e in examples)


@pytest.mark.parametrize("split,count,positives", [("train", 3668, 2474), ("dev", 408, 279), ("test", 1725, 0)])
def test_mrpc_real(shared_data, split, count, positives):
    examples, _ = read_glue("mrpc", shared_data / "MRPC" / f"{split}.tsv")  # train/dev headers carry a BOM
    assert len(examples) == count
    assert sum(e.label == 1 for e in examples) == positives
    assert all(e.text_b for e in examples)
    if split == "train":
        assert examples[0].text_a.startswith("Amrozi accused his brother , whom he called \" the witness \"")
        assert examples[0].label == 1


def test_mrpc_inline_with_bom_and_quotes(tmp_path):
    path = _write(tmp_path, "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                  '1\t1\t2\tHe said " hi .\tA "quoted\n0\t3\t4\tx\ty\n', bom=True)
    examples, labels = read_glue("mrpc", path)
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [('He said " hi .', 'A "quoted', 1), ("x", "y", 0)]
    assert examples[0].guid == "train-0"


def test_cola_inline(tmp_path):
    train = _write(tmp_path, "train.tsv", "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n")
    examples, labels = read_glue("cola", train)
    assert labels == ["0", "1"]
    assert [(e.text_a, e.label) for e in examples] == [("Our friends won't buy this analysis.", 1),
                                                       ("They drank the pub.", 0)]
    test = _write(tmp_path, "test.tsv", "index\tsentence\n0\tBill whistled past the house.\n")
    examples, _ = read_glue("cola", test)
    assert examples[0].text_a == "Bill whistled past the house." and examples[0].label is None


def test_pair_layouts_inline(tmp_path):
    rte = _write(tmp_path, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tnot_entailment\n")
    assert read_glue("rte", rte)[0][0] == TextExample("rte-0", "A.", "B.", 1)
    qnli = _write(tmp_path, "qnli.tsv", "index\tquestion\tsentence\tlabel\n0\tQ?\tS.\tentailment\n")
    assert read_glue("qnli", qnli)[0][0].label == 0
    wnli_test = _write(tmp_path, "wnli.tsv", "index\tsentence1\tsentence2\n0\tA.\tB.\n")
    assert read_glue("wnli", wnli_test)[0][0].label is None
    qqp = _write(tmp_path, "qqp.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n7\t1\t2\tWhy?\tHow?\t1\n")
    assert read_glue("qqp", qqp)[0][0] == TextExample("qqp-0", "Why?", "How?", 1)
    qqp_test = _write(tmp_path, "qqp_test.tsv", "id\tquestion1\tquestion2\n0\tWhy?\tHow?\n")
    assert read_glue("qqp", qqp_test)[0][0] == TextExample("qqp_test-0", "Why?", "How?", None)
    mnli_cols = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
                 "sentence1_parse", "sentence2_parse", "sentence1", "sentence2"]
    mnli_train = _write(tmp_path, "mnli.tsv", "\t".join(mnli_cols + ["label1", "gold_label"]) + "\n"
                        + "\t".join(["0", "1", "1e", "gov", "(", "(", "(", "(", "Prem.", "Hyp.", "neutral", "neutral"]) + "\n")
    (example,), labels = read_glue("mnli", mnli_train)
    assert (example.text_a, example.text_b, labels[example.label]) == ("Prem.", "Hyp.", "neutral")
    dev_cols = mnli_cols + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
    mnli_dev = _write(tmp_path, "dev_matched.tsv", "\t".join(dev_cols) + "\n" + "\t".join(
        ["0", "1", "1e", "gov", "(", "(", "(", "(", "P", "H", "neutral", "entailment", "entailment", "entailment",
         "entailment", "entailment"]) + "\n")
    assert read_glue("mnli", mnli_dev)[0][0].label == 1


def test_stsb_inline(tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
    path = _write(tmp_path, "sts.tsv", header + "\tscore\n0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\t"
                  "A plane is taking off.\tAn air plane is taking off.\t5.000\n")
    (example,), labels = read_glue("sts-b", path)
    assert labels is None and example.label == 5.0 and example.text_b == "An air plane is taking off."
    test = _write(tmp_path, "sts_test.tsv", header + "\n0\tg\tf\ty\to\ts\ts\tA.\tB.\n")
    assert read_glue("stsb", test)[0][0].label is None


def test_malformed_inputs_name_file_and_line(tmp_path):
    path = _write(tmp_path, "bad.tsv", "sentence\tlabel\ngood\t1\nbad row without tab\n")
    with pytest.raises(DataFormatError, match=r"bad\.tsv, line 3: expected 2 tab-separated columns, found 1"):
        read_glue("sst-2", path)
    path = _write(tmp_path, "bad_label.tsv", "sentence\tlabel\ngood\tpositive\n")
    with pytest.raises(DataFormatError, match=r"bad_label\.tsv, line 2: unknown sst-2 label 'positive'"):
        read_glue("sst-2", path)
    path = _write(tmp_path, "bad_score.tsv", "a\tb\tc\td\te\tf\tg\tsentence1\tsentence2\tscore\n"
                  "0\t1\t2\t3\t4\t5\t6\tA\tB\thigh\n")
    with pytest.raises(DataFormatError, match=r"line 2: score 'high' is not a number"):
        read_glue("sts-b", path)
    with pytest.raises(ValueError, match="unknown GLUE task"):
        read_glue("squad", path)


def test_columns_are_picked_by_their_header_names(tmp_path):
    swapped = _write(tmp_path, "swapped.tsv", "label\tsentence\n1\tgreat film\n0\tbad film\n")
    examples, _ = read_glue("sst-2", swapped)
    assert [(e.text_a, e.label) for e in examples] == [("great film", 1), ("bad film", 0)]
    mrpc = _write(tmp_path, "mrpc.tsv", "#2-String\t#1-String\tquality\nB.\tA.\t1\n")
    assert read_glue("mrpc", mrpc)[0] == [TextExample("mrpc-0", "A.", "B.", 1)]


def test_a_header_without_the_expected_columns_names_them(tmp_path):
    unknown = _write(tmp_path, "unknown.tsv", "text\ttarget\ngood film\t1\n")
    with pytest.raises(DataFormatError, match=r"unknown\.tsv, line 1: not a sst-2 header: expected columns named "
                                              r"sentence, label .*found 'text', 'target' \(rename"):
        read_glue("sst-2", unknown)
    no_label = _write(tmp_path, "no_label.tsv", "sentence\ttarget\ngood film\t1\n")
    with pytest.raises(DataFormatError, match=r"line 1: no 'label' column in the sst-2 header"):
        read_glue("sst-2", no_label)


def test_a_file_without_its_header_is_refused_not_read_without_its_first_row(tmp_path):
    headless = _write(tmp_path, "headless.tsv", "great film\t1\nbad film\t0\n")
    with pytest.raises(DataFormatError, match=r"headless\.tsv, line 1: .*found 'great film', '1' \(is the header "
                                               r"line missing"):
        read_glue("sst-2", headless)
    rte = _write(tmp_path, "rte.tsv", "0\tA.\tB.\tentailment\n")
    with pytest.raises(DataFormatError, match=r"header line missing"):
        read_glue("rte", rte)
    cola = _write(tmp_path, "cola.tsv", "great film\t1\n")          # neither CoLA's 4 columns nor a header
    with pytest.raises(DataFormatError, match=r"for CoLA, GLUE's 4 columns without a header"):
        read_glue("cola", cola)
    named = _write(tmp_path, "cola_named.tsv", "sentence\tlabel\nThey drank the pub.\t0\n")
    assert read_glue("cola", named)[0] == [TextExample("cola_named-0", "They drank the pub.", None, 0)]


def test_a_byte_that_is_not_utf8_is_named_with_its_line_and_offset(tmp_path):
    path = tmp_path / "latin1.tsv"
    data = "sentence\tlabel\ngood\t1\ncafé\t1\n".encode("latin-1")
    path.write_bytes(data)
    at = data.index(b"\xe9")
    with pytest.raises(DataFormatError, match=rf"latin1\.tsv, line 3: not UTF-8: byte 0xe9 at byte offset {at} "):
        read_glue("sst-2", path)
