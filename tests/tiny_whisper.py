"""The tests' tiny random Whisper is the test model's own (studio.testwhisper): one writer, not two."""

from studio.testwhisper import SPECIALS, write_tiny_whisper

__all__ = ["SPECIALS", "write_tiny_whisper"]
