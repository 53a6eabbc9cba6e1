"""The CLI's one error type, apart so every subcommand module can raise it without importing main.py."""

import sys


class CommandError(Exception):
    """A user-facing failure: printed without a traceback, exit code 2."""

    def __str__(self) -> str:
        # A library error worded for Python callers ("pass vocab=...") that this error only repeats
        # (`raise CommandError(str(e)) from None` inside `except`) is worded for the command line instead.
        folder_vocab = sys.modules.get("bert_keras.preprocessing.folder_vocab")
        context = self.__context__
        if folder_vocab and isinstance(context, folder_vocab.MissingVocabularyError) and self.args == (str(context),):
            return context.message("--vocab vocab.txt")
        return super().__str__()
