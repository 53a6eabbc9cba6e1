"""Cases the fuzzer found failing, kept by id: tests/fuzz/test_fuzz_regressions.py runs each of them on every run,
whatever the seed draws. KNOWN_FAILURES: the ones still failing, with what they do (marked xfail(strict=True) so
they show; the fix removes the entry, and the case stays in REGRESSIONS)."""

REGRESSIONS = [
]

KNOWN_FAILURES = {
}
