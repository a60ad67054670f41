"""Chinese lyrics as upstream reads them: the reference ids, the steps behind them, where the files come from,
and what the lyric report says. Upstream's g2p files come from `../shared/reference/models-dir` (laid out as
`--models-dir` expects); tests that need them skip, saying why, where it is absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from shared_paths import ROOT, SHARED

from engine.lyrics import layout_lyrics
from engine.lyrics.g2p import LyricTokenizer
from engine.lyrics.g2p.mandarin import (
    LEXICON,
    MERGED,
    OUTSIDE,
    PYPINYIN,
    UNREAD,
    UPSTREAM,
    bu_sandhi,
    merge_bu,
    merge_er,
    merge_yi,
    normalise,
    third_tone_sandhi,
    yi_sandhi,
)
from engine.lyrics.g2p.zh_data import Lexicon, find_chinese_files
from engine.lyrics.g2p.zh_numbers import numbers_to_chinese
from engine.lyrics.report import BREAK, SUNG

MODELS_DIR = SHARED / "reference" / "models-dir"
SOURCES = MODELS_DIR / "ASLP-lab" / "DiffRhythm" / "g2p" / "sources"
VOCAB = SHARED / "reference" / "diffrhythm" / "g2p" / "g2p" / "vocab.json"  # no Chinese files beside it
CASES = SHARED / "reference" / "diffrhythm" / "cases" / "g2p_zh.json"


@pytest.fixture(scope="module")
def models_dir() -> Path:
    if not (SOURCES / "chinese_lexicon.txt").is_file():
        pytest.skip(f"upstream's Chinese g2p files not found under {MODELS_DIR} (CI keeps ../shared beside the checkout)")
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: the polyphone model cannot run")
    return MODELS_DIR


@pytest.fixture(scope="module")
def zh(models_dir) -> LyricTokenizer:
    return LyricTokenizer(models_dir=models_dir)


@pytest.fixture()
def no_default_files(tmp_path, monkeypatch):
    """Point the model-file lookup at an empty folder, so only what a test lays out is found."""
    empty = tmp_path / "empty-models"
    empty.mkdir()
    monkeypatch.setenv("STUDIO_MODELS_DIR", str(empty))
    monkeypatch.delenv("STUDIO_CHINESE_G2P_DIR", raising=False)
    return empty


def lay_out(root: Path, names: list[str]) -> Path:
    """Link upstream's files `names` (paths under g2p/) into root/ASLP-lab/DiffRhythm/g2p/, the models-dir layout."""
    for name in names:
        dest = root / "ASLP-lab" / "DiffRhythm" / "g2p" / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(MODELS_DIR / "ASLP-lab" / "DiffRhythm" / "g2p" / name)
    return root


LEXICON_FILES = ["g2p/vocab.json", "sources/chinese_lexicon.txt", "sources/pinyin_2_bpmf.txt"]
POLY_FILES = [f"sources/g2p_chinese_model/{n}" for n in ("poly_bert_model.onnx", "polychar.txt", "polydict.json",
                                                           "vocab.txt", "polydict_r.json", "config.json")]


# -- the reference lines -------------------------------------------------------------------------------
def test_every_reference_line_gives_upstreams_ids(zh):
    if not CASES.is_file():
        pytest.skip(f"{CASES} not found")
    cases = json.loads(CASES.read_text(encoding="utf-8"))
    wrong = []
    for case in cases:
        enc = zh.encode(case["text"])
        if case["ids"] is None:  # upstream raises: no tokens, and the line says so
            if enc.tokens or enc.kind != "break" or "a pause in the singing" not in enc.note:
                wrong.append((case["text"], case["error"], enc))
        elif enc.tokens != case["ids"]:
            wrong.append((case["text"], case["phones"], enc.phones))
    assert not wrong, "\n".join(f"{t}\n  upstream {want}\n  studio   {got}" for t, want, got in wrong)
    assert zh.mandarin.mode == UPSTREAM and len(cases) == 25


def test_polyphones_read_in_context(zh):
    phones = zh.encode("我还没还你的钱").phones.split("|")
    assert phones[1:3] == ["x", "uan↑"] and phones[5:7] == ["x", "uan↑"]  # huán both times, as the model says
    assert zh.encode("你得好好想想").phones.startswith("n|i↓↑|t⁼|eɪ↓↑")  # děi
    assert zh.encode("我看了好了").phones == "uo↓↑|kʰ|an↓|l|ə|x|ɑʊ↓↑|l|ə"


def test_polyphone_model_tokens_and_readings(zh):
    zh.encode("你好")  # loads the model
    model = zh.mandarin._model
    ids = model.token_ids("还,🎵")
    assert len(ids) == 4 and ids[0] == model._cls == 101 and ids[-1] == model._unk == 100  # [CLS], no [SEP]
    assert model.readings("我还没还你的钱")[1] == "huan2"
    assert model.readings("") == []


def test_mixed_and_traditional_lines(zh):
    mixed = zh.encode("我爱你 baby")
    assert mixed.languages == ("zh", "en") and mixed.tokens[:4] == zh.encode("我爱你").tokens
    trad = zh.encode("愛情不是你想賣就能賣")
    assert trad.dropped == (("賣", UNREAD), ("賣", UNREAD)) and "賣" in trad.phones
    assert trad.tokens == zh.encode("愛情不是你想就能").tokens  # 賣 yields no id, as upstream
    kana = zh.encode("我爱你こんにちは")
    assert [ch for ch, why in kana.dropped if why == OUTSIDE] == list("こんにちは")
    assert zh.encode("你来不").dropped == (("不", MERGED),)


# -- the steps, without the data files -----------------------------------------------------------------
@pytest.mark.parametrize("text, read", [
    ("2024年", "二零二四年"), ("1999年的夏天", "一九九九年的夏天"), ("他跑了3.5公里", "他跑了三点五公里"),
    ("2024年12月25日", "二零二四年十二月二十五日"), ("100000", "十万"), ("10010", "一万零一十"),
    ("1000000001", "十亿零一"), ("20000年", "二零零零零年"), ("007", "七"), ("0.05", "零点零五"), ("-3", "负三"),
    ("3/4", "四分之三"), ("50%", "百分之五十"), ("-5.5%", "百分之负五点五"), ("30℃", "三十摄氏度"),
    ("1.2.3", "一点二.三"), ("110", "一百一十"), ("12345678901234567", "12345678901234567"),
    ("２０２４年", "二零二四年"), ("第1次", "第一次"),
])
def test_numbers_read_as_cn2an_reads_them(text, read):
    # expected values: cn2an 0.5.23 `transform(text, "an2cn")`, which upstream calls
    assert numbers_to_chinese(text) == read


def test_normalisation():
    assert normalise("你好，世界！ 2024年") == "你好,世界!二零二四年"
    assert normalise("风吹过山岗 我听见") == "风吹过山岗我听见"  # spaces between Chinese runs go
    assert normalise("你好……再见") == "你好……再见" and normalise("こんにちは我") == "我"


def test_word_merges():
    assert merge_bu(["我", "不", "知道"]) == ["我", "不知道"]
    assert merge_bu(["你", "来", "不"]) == ["你", "来"]  # a final 不 is lost, as upstream
    assert merge_yi(["看", "一", "看"]) == ["看一看"]
    assert merge_yi(["一", "个", "人"]) == ["一个", "人"]
    assert merge_er(["玩", "儿"]) == ["玩儿"]


def test_tone_sandhi():
    assert bu_sandhi("不对", ["ㄅㄨˋ", "ㄉㄨㄟˋ"]) == ["ㄅㄨˊ", "ㄉㄨㄟˋ"]  # 不 before a 4th tone
    assert bu_sandhi("不知", ["ㄅㄨˋ", "ㄓ"]) == ["ㄅㄨˋ", "ㄓ"]
    assert bu_sandhi("好不好", ["ㄏㄠˇ", "ㄅㄨˋ", "ㄏㄠˇ"])[1] == "ㄅㄨ˙"
    assert yi_sandhi("一个", ["ㄧ", "ㄍㄜˋ"])[0] == "ㄧˊ" and yi_sandhi("一起", ["ㄧ", "ㄑㄧˇ"])[0] == "ㄧˋ"
    assert yi_sandhi("第一", ["ㄉㄧˋ", "ㄧˋ"])[1] == "ㄧ"
    assert third_tone_sandhi("你好", ["ㄋㄧˇ", "ㄏㄠˇ"]) == ["ㄋㄧˊ", "ㄏㄠˇ"]
    assert third_tone_sandhi("小老虎", ["ㄒㄧㄠˇ", "ㄌㄠˇ", "ㄏㄨˇ"])[:2] == ["ㄒㄧㄠˇˊ", "ㄌㄠˇˊ"]  # upstream appends


def test_lexicon_is_compact_and_last_entry_wins(tmp_path):
    path = tmp_path / "lex.txt"
    path.write_text("好\thao3\n你好\tni3 hao3\nbad line\n你\tni3\n好\thao4\n", encoding="utf-8")
    lex = Lexicon(path)
    assert len(lex) == 3 and lex.get("好") == "hao4" and lex.get("你好") == "ni3 hao3"
    assert "你" in lex and "他" not in lex and lex.get("他") is None and 3 not in lex


# -- where the files come from -------------------------------------------------------------------------
def test_models_dir_argument_and_env(models_dir, no_default_files, monkeypatch):
    assert LyricTokenizer(VOCAB, models_dir=models_dir).mandarin.mode == UPSTREAM
    assert LyricTokenizer(VOCAB).mandarin.mode == PYPINYIN  # the lookup's folder is empty
    monkeypatch.setenv("STUDIO_MODELS_DIR", str(models_dir))
    files = find_chinese_files()
    assert files.lexicon and files.polyphone is not None
    assert files.paths["lexicon"] == models_dir / "ASLP-lab/DiffRhythm/g2p/sources/chinese_lexicon.txt"


def test_studio_folder_and_beside_the_vocab(models_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("STUDIO_MODELS_DIR", raising=False)
    monkeypatch.delenv("STUDIO_CHINESE_G2P_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the studio's own folder: ~/.cache/diffrhythm-studio/models
    assert find_chinese_files().paths == {}
    lay_out(tmp_path / "home" / ".cache" / "diffrhythm-studio" / "models", LEXICON_FILES[1:])
    assert find_chinese_files().lexicon and find_chinese_files().polyphone is None
    other = lay_out(tmp_path / "elsewhere", LEXICON_FILES + POLY_FILES)  # a vocab from some models folder
    files = find_chinese_files(vocab_path=other / "ASLP-lab/DiffRhythm/g2p/g2p/vocab.json")
    assert files.polyphone is not None and str(other) in str(files.paths["onnx"])


def test_explicit_folder_is_the_only_place_searched(models_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_MODELS_DIR", str(models_dir))
    assert LyricTokenizer(VOCAB, chinese_data_dir=tmp_path).mandarin.mode == PYPINYIN
    monkeypatch.setenv("STUDIO_CHINESE_G2P_DIR", str(SOURCES))
    assert LyricTokenizer(VOCAB).mandarin.mode == UPSTREAM


# -- the lyric report ----------------------------------------------------------------------------------
LRC = "[00:01.00]我还没还你的钱\n[00:05.00]愛情不是你想賣就能賣\n[00:09.00]，。！？……\n[00:12.00]2024年我们一起去看海\n"


def test_report_names_dropped_characters_and_breaks(zh):
    layout = layout_lyrics(LRC, 120, tokenizer=zh)
    sold = layout.lines[1]
    assert sold.status == SUNG and sold.warnings and sold.warnings[0].startswith("not sung: 賣")
    assert any(w.startswith("line 2: not sung: 賣") for w in layout.warnings)
    punct = layout.lines[2]
    assert punct.status == BREAK and punct.tokens == [] and "a pause in the singing" in punct.reason
    assert layout.can_sing and not layout.notes  # upstream's ids, all files present: nothing to note


def test_report_says_when_the_polyphone_model_is_absent(models_dir, tmp_path, no_default_files):
    lexicon_only = lay_out(tmp_path / "m", LEXICON_FILES)
    tok = LyricTokenizer(models_dir=lexicon_only)
    layout = layout_lyrics(LRC, 120, tokenizer=tok)
    assert tok.mandarin.mode == LEXICON
    assert [n for n in layout.notes if "without the polyphone model" in n and "poly_bert_model.onnx" in n
            and "studio models fetch --only polyphone" in n]
    bare = LyricTokenizer(VOCAB, models_dir=tmp_path / "nothing")
    notes = layout_lyrics(LRC, 120, tokenizer=bare).notes
    assert bare.mandarin.mode == PYPINYIN and [n for n in notes if "without DiffRhythm's pronunciation dictionary" in n]


def test_chinese_path_stays_torch_free(models_dir):
    code = ("import sys; from engine.lyrics import LyricTokenizer; "
            f"t = LyricTokenizer(models_dir={str(models_dir)!r}); e = t.encode('我还没还你的钱'); "
            "assert t.mandarin.mode == 'upstream', t.mandarin.problem; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; assert not bad, bad")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
