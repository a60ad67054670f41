"""The model's phone vocabulary (`vocab.json`, 363 symbols) and where to find it.

The product downloads `vocab.json` like the weights; the path comes from an argument, else the
`STUDIO_LYRICS_VOCAB` environment variable, else the model-file lookup (`models_dir` / `$STUDIO_MODELS_DIR`, the
Hugging Face cache, the studio's own folder). The test model writes its own (`studio.testmodel`). Errors name
the file, never the folder: they reach the page, and a server path tells a musician nothing.
Model ids are vocab ids + 1 (0 is the filler between lines).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ENV_VAR = "STUDIO_LYRICS_VOCAB"

COMMA_ID = 1  # model id of ","
PERIOD_ID = 2  # model id of "." (end of line)


class VocabError(RuntimeError):
    """vocab.json is missing or malformed."""


@dataclass(frozen=True)
class Vocab:
    phone_to_id: dict[str, int]
    path: str
    id_to_phone: dict[int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id_to_phone", {i: p for p, i in self.phone_to_id.items()})

    def __len__(self) -> int:
        return len(self.phone_to_id)

    def model_ids(self, phones: str) -> list[int]:
        """'a|b|c' -> model ids; phones the vocabulary lacks are dropped, as upstream does."""
        return [self.phone_to_id[p] + 1 for p in phones.split("|") if p in self.phone_to_id]

    def unknown(self, phones: str) -> list[str]:
        return [p for p in phones.split("|") if p and p not in self.phone_to_id]

    def decode(self, ids: list[int]) -> str:
        return "|".join(self.id_to_phone.get(i - 1, "?") for i in ids)


def resolve_vocab_path(path: str | os.PathLike[str] | None = None, *,
                       models_dir: str | os.PathLike[str] | None = None) -> Path:
    if path is not None:
        return Path(path)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    from engine.modelfiles import check_file, get

    spec = get("vocab").files[0]
    status = check_file("vocab", spec, models_dir)
    if status.ok and status.path is not None:
        return status.path
    return status.path if status.path is not None else Path(spec.basename)


@lru_cache(maxsize=4)
def _load(path: str) -> Vocab:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        table = data["vocab"]
        if not isinstance(table, dict) or not all(isinstance(v, int) for v in table.values()):
            raise ValueError("'vocab' must map phone symbols to integer ids")
    except FileNotFoundError:
        raise VocabError(
            "the phone vocabulary (vocab.json) is missing: run `studio models fetch --only vocab`"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) else exc  # OSError's str names the path
        raise VocabError(f"the phone vocabulary (vocab.json) is unreadable: {detail}") from None
    return Vocab(dict(table), str(path))


def load_vocab(path: str | os.PathLike[str] | None = None, *,
               models_dir: str | os.PathLike[str] | None = None) -> Vocab:
    """Load (and cache) vocab.json from `path`, $STUDIO_LYRICS_VOCAB or the model files."""
    return _load(str(resolve_vocab_path(path, models_dir=models_dir)))
