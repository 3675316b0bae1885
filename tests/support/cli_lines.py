"""Which of cp-inspect's output lines say the command failed (inspector/recording_open.py's convention):
every line it writes starts 'cp-inspect: '; a warning (the command goes on) 'cp-inspect: warning: ' and a
note 'cp-inspect: note: ', so a test that wants the one error line leaves those out."""

from __future__ import annotations


def is_error_line(line: str) -> bool:
    return line.startswith("cp-inspect:") and not line.startswith(
        ("cp-inspect: warning:", "cp-inspect: note:")
    )
