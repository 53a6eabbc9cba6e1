#!/usr/bin/env python
"""WikiText (`= Title =` headings, one paragraph per line) -> google-research's pretraining text format: one
sentence per line, a blank line between articles. Sentences end at " . ", " ? " or " ! " (WikiText is
tokenized with spaces around punctuation); section headings are dropped.

    python tools/wikitext_to_sentences.py ../shared/data/wikitext-2/valid.txt --out /tmp/wiki_valid.txt
    python tools/wikitext_to_sentences.py ../shared/data/wikitext-2/valid.txt --articles 6 --out tests/fixtures/pretraining_corpus.txt
"""

import argparse
import re

ARTICLE = re.compile(r"^ = [^=].* = $")
SENTENCE_END = re.compile(r"(?<= [.?!]) ")


def articles(path: str):
    article = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if ARTICLE.match(line):
                if article:
                    yield article
                article = []
            elif line.strip() and not line.strip().startswith("="):
                article.extend(s.strip() for s in SENTENCE_END.split(line.strip()) if s.strip())
    if article:
        yield article


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("wikitext")
    p.add_argument("--out", required=True)
    p.add_argument("--articles", type=int, help="keep the first N articles")
    args = p.parse_args()
    kept = [a for _, a in zip(range(args.articles or 10**9), articles(args.wikitext))]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(a) for a in kept) + "\n")
    print(f"wrote {args.out}: {len(kept)} articles, {sum(map(len, kept))} sentences")


if __name__ == "__main__":
    main()
