"""google-research run_squad.py's doc-stride rules, transcribed: the reference for the windows (SQuAD's, and the
tagger's over a long text)."""


def google_doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """run_squad.py convert_examples_to_features, verbatim logic."""
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def google_is_max_context(spans, cur, position):
    """run_squad.py _check_is_max_context, verbatim logic."""
    best_score, best = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best = score, index
    return cur == best
