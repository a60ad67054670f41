"""Upstream's Chinese g2p data files: where they are, and the lexicon held compactly.

The files are model files like any other (`engine.modelfiles`: models `chinese-lexicon` and `polyphone`,
fetched by `studio models fetch`). A file is taken from the first place that has it:

1. an explicit folder (`LyricTokenizer(chinese_data_dir=...)`, else `$STUDIO_CHINESE_G2P_DIR`) laid out like
   upstream's `g2p/sources/` (`chinese_lexicon.txt`, `pinyin_2_bpmf.txt`, `g2p_chinese_model/...`); when one
   is given, nothing else is searched;
2. the model-file lookup: `--models-dir` / `$STUDIO_MODELS_DIR`, then the studio's own folder
   (`~/.cache/diffrhythm-studio/models`). These files are not on the Hugging Face hub, so no hub cache
   holds them;
3. beside the phone vocabulary in use: `<root>/g2p/g2p/vocab.json` -> `<root>/g2p/sources/`, the layout
   the same lookup gives, so a vocab resolved from a models folder brings its Chinese files along.

The lexicon (665k words, 14.8 MB) is held as two sorted UTF-8 blobs with offsets (about 20 MB) instead of
a dict of Python strings (about 115 MB), and looked up by binary search.
"""

from __future__ import annotations

import os
import threading
from array import array
from dataclasses import dataclass
from pathlib import Path

from engine.lyrics.g2p.polyphone import PolyphoneFiles

CHINESE_DATA_ENV = "STUDIO_CHINESE_G2P_DIR"

# role -> (model name in engine.modelfiles, path inside upstream's g2p/sources/)
FILES = {
    "lexicon": ("chinese-lexicon", "chinese_lexicon.txt"),
    "pinyin_2_bpmf": ("chinese-lexicon", "pinyin_2_bpmf.txt"),
    "onnx": ("polyphone", "g2p_chinese_model/poly_bert_model.onnx"),
    "polychar": ("polyphone", "g2p_chinese_model/polychar.txt"),
    "polydict": ("polyphone", "g2p_chinese_model/polydict.json"),
    "bert_vocab": ("polyphone", "g2p_chinese_model/vocab.txt"),
}
SOURCES_PREFIX = "g2p/sources/"
POLYPHONE_ROLES = ("onnx", "polychar", "polydict", "bert_vocab")


@dataclass(frozen=True)
class ChineseFiles:
    paths: dict[str, Path]  # role -> file found
    searched: str  # where they were looked for, for messages

    def missing(self, *roles: str) -> list[str]:
        return [FILES[r][1].rsplit("/", 1)[-1] for r in roles if r not in self.paths]

    @property
    def lexicon(self) -> bool:
        return "lexicon" in self.paths and "pinyin_2_bpmf" in self.paths

    @property
    def polyphone(self) -> PolyphoneFiles | None:
        if not all(r in self.paths for r in POLYPHONE_ROLES):
            return None
        p = self.paths
        return PolyphoneFiles(p["onnx"], p["polychar"], p["polydict"], p["bert_vocab"])


def _from_modelfiles(role: str, models_dir: str | os.PathLike[str] | None) -> Path | None:
    from engine.modelfiles import check_file, get

    model, rel = FILES[role]
    for spec in get(model).files:
        if spec.filename == SOURCES_PREFIX + rel:
            status = check_file(model, spec, models_dir)
            return status.path if status.ok else None
    return None


def find_chinese_files(data_dir: str | os.PathLike[str] | None = None, *,
                       models_dir: str | os.PathLike[str] | None = None,
                       vocab_path: str | os.PathLike[str] | None = None) -> ChineseFiles:
    """Where each Chinese g2p file is (see the module docstring for the order)."""
    folder = data_dir if data_dir is not None else os.environ.get(CHINESE_DATA_ENV) or None
    if folder is not None:
        root = Path(folder).expanduser()
        found = {r: root / rel for r, (_, rel) in FILES.items() if (root / rel).is_file()}
        return ChineseFiles(found, str(root))
    beside = Path(vocab_path).absolute().parent.parent / "sources" if vocab_path else None
    found = {}
    for role, (_, rel) in FILES.items():
        path = _from_modelfiles(role, models_dir)
        if path is None and beside is not None and (beside / rel).is_file():
            path = beside / rel
        if path is not None:
            found[role] = path
    from engine.modelfiles.locate import default_models_dir, user_models_dir

    places = [str(p) for p in (user_models_dir(models_dir), default_models_dir()) if p is not None]
    if beside is not None:
        places.append(str(beside))
    return ChineseFiles(found, ", ".join(dict.fromkeys(places)))


class Lexicon:
    """chinese_lexicon.txt: word -> pinyin ("ni3 hao3"); where a word repeats, its last line wins (as in
    upstream's dict). Lines that are not `word<TAB>pinyin` are skipped (upstream fails to start on them)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        words: list[str] = []
        values: list[str] = []
        for line in Path(path).read_text(encoding="utf-8").split("\n"):
            parts = line.strip().split("\t")
            if len(parts) == 2:
                words.append(parts[0])
                values.append(parts[1])
        order = sorted(range(len(words)), key=words.__getitem__)  # stable: repeats stay in file order
        keep = [i for k, i in enumerate(order) if k + 1 == len(order) or words[order[k + 1]] != words[i]]
        self._keys, self._key_at = _pack(words[i] for i in keep)
        self._values, self._value_at = _pack(values[i] for i in keep)
        self._n = len(keep)
        self.path = str(path)

    def __len__(self) -> int:
        return self._n

    def _index(self, word: str) -> int:
        key = word.encode("utf-8")
        keys, at = self._keys, self._key_at
        lo, hi = 0, self._n
        while lo < hi:
            mid = (lo + hi) // 2
            if keys[at[mid]:at[mid + 1]] < key:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < self._n and keys[at[lo]:at[lo + 1]] == key else -1

    def get(self, word: str, default: str | None = None) -> str | None:
        i = self._index(word)
        return default if i < 0 else self._values[self._value_at[i]:self._value_at[i + 1]].decode("utf-8")

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self._index(word) >= 0


def _pack(items) -> tuple[bytes, array]:
    """Strings -> one UTF-8 blob and the offsets of their starts (plus the end)."""
    parts = [s.encode("utf-8") for s in items]
    offsets = array("I", [0])
    total = 0
    for p in parts:
        total += len(p)
        offsets.append(total)
    return b"".join(parts), offsets


def read_pinyin_table(path: str | os.PathLike[str]) -> dict[str, str]:
    """pinyin_2_bpmf.txt: toneless pinyin -> bopomofo ("hao" -> "ㄏㄠ")."""
    table: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").split("\n"):
        parts = line.strip().split("\t")
        if len(parts) == 2:
            table[parts[0]] = parts[1]
    return table


_LEXICONS: dict[str, Lexicon] = {}
_LOCK = threading.Lock()


def load_lexicon(path: str | os.PathLike[str]) -> Lexicon:
    """One lexicon per process and file."""
    key = str(Path(path).resolve())
    with _LOCK:
        lex = _LEXICONS.get(key)
        if lex is None:
            lex = _LEXICONS[key] = Lexicon(key)
            _return_freed_memory()
        return lex


def _return_freed_memory() -> None:
    """Hand the parse's freed heap back to the OS (glibc keeps ~30 MB of it otherwise); a no-op elsewhere."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
