"""Upstream's polyphone tagger: a small BERT (ONNX) that picks the reading of 还, 得, 为, ... in context.

Upstream (`g2p/g2p/chinese_model_g2p.py`) feeds the normalised Chinese segment to the model as
`[CLS]` followed by one token per character (each character looked up in the model's `vocab.txt`, the
bert-base-chinese vocabulary, `[UNK]` when absent: no WordPiece splitting, no `[SEP]`). The model
returns one row of 391 class scores per character; the reading of the character at position *i* is
the arg-max class of row *i*, looked up in `polydict.json` (`"5": "为{wei2}"` -> `wei2`). The arg-max
is taken over all classes, not only the character's own, as upstream does.

The rows do not depend on which position is asked for, so one run per segment serves every polyphone
in it (upstream runs the model once per polyphone). The session is CPU-only (onnxruntime) and is
loaded once per process per model file (`load_polyphone_model`).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

MAX_CHARS = 510  # the model has 512 positions: [CLS] + the characters
_LABEL = re.compile(r"^(.)\{([a-z]+[0-5])\}$")


class PolyphoneError(RuntimeError):
    """The polyphone model cannot be used (onnxruntime missing, a file unreadable)."""


@dataclass(frozen=True)
class PolyphoneFiles:
    onnx: Path  # poly_bert_model.onnx
    polychar: Path  # polychar.txt: the characters the model decides
    polydict: Path  # polydict.json: class number (1-based) -> "字{pinyin}"
    vocab: Path  # vocab.txt: the BERT character vocabulary


class PolyphoneModel:
    def __init__(self, files: PolyphoneFiles, *, threads: int = 1) -> None:
        try:
            import numpy as np
            import onnxruntime as ort
        except ImportError as exc:
            raise PolyphoneError(f"onnxruntime is not installed ({exc}): pip install onnxruntime") from None
        self._np = np
        try:
            self.chars = frozenset(
                line for line in files.polychar.read_text(encoding="utf-8").split("\n") if line)
            labels = json.loads(files.polydict.read_text(encoding="utf-8"))
            self._pinyin = [""] * (max(int(k) for k in labels) + 1)
            for key, value in labels.items():
                m = _LABEL.match(value)
                if m is None:
                    raise ValueError(f"polydict.json entry {key}: {value!r} is not '字{{pinyin}}'")
                self._pinyin[int(key)] = m.group(2)
            # transformers' BertTokenizer vocabulary: the token on line i has id i (a repeated token: the last)
            self._ids = {tok: i for i, tok in enumerate(files.vocab.read_text(encoding="utf-8").split("\n"))}
            self._unk, self._cls = self._ids["[UNK]"], self._ids["[CLS]"]
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            self._session = ort.InferenceSession(str(files.onnx), sess_options=options,
                                                 providers=["CPUExecutionProvider"])
        except (OSError, ValueError, KeyError) as exc:
            raise PolyphoneError(f"polyphone model files unreadable: {exc}") from exc
        except Exception as exc:  # onnxruntime's own errors (a damaged model file)
            raise PolyphoneError(f"polyphone model cannot be loaded: {exc}") from exc
        self.files = files

    def token_ids(self, text: str) -> list[int]:
        return [self._cls] + [self._ids.get(ch, self._unk) for ch in text]

    def readings(self, text: str) -> list[str]:
        """The model's pinyin (e.g. 'huan2') for every character of `text` (the normalised segment)."""
        if not text:
            return []
        if len(text) > MAX_CHARS:
            raise PolyphoneError(f"segment of {len(text)} characters is longer than the model's {MAX_CHARS}")
        ids = self._np.asarray([self.token_ids(text)], dtype=self._np.int32)
        scores = self._session.run(["outputs"], {"input_ids": ids})[0][0]
        return [self._pinyin[int(k) + 1] for k in scores.argmax(axis=-1)]


_MODELS: dict[PolyphoneFiles, PolyphoneModel] = {}
_LOCK = threading.Lock()


def load_polyphone_model(files: PolyphoneFiles) -> PolyphoneModel:
    """One model per process and file set (raises PolyphoneError)."""
    with _LOCK:
        model = _MODELS.get(files)
        if model is None:
            model = _MODELS[files] = PolyphoneModel(files)
        return model
