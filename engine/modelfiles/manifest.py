"""Every model file the studio uses: where it comes from, how big it is, how to check it, its licence.

Honesty about pins (the hub cannot be reached from where this was written):
- DiffRhythm hub repos: revision "main" (not pinned), sizes and checksums unknown -> only presence is
  checked. Approximate sizes are shown for the user.
- MuQ-MuLan / MuQ / XLM-R: revisions pinned to commits seen pinned in a third-party project that
  downloads them; not verified here. Checksums unknown.
- Whisper (the lyrics check): revisions pinned to commits seen pinned in third-party projects that
  download them (openai/whisper-large-v3-turbo 41f01f3f, openai/whisper-small 973afd24); not verified
  here. Checksums unknown.
- Upstream GitHub files (g2p data, vocal.npy): pinned to DiffRhythm commit 28ad63c0 with their git blob
  ids (read from the repository), so they are fully verifiable; vocab.json, vocal.npy, the Chinese
  lexicon, the pinyin table and the polyphone ONNX model also have a size and a sha256 computed from
  copies checked against those blob ids (the two large ones from the PyPI sdist maskgct 0.0.19, whose
  copies have upstream's blob ids).
"""

from __future__ import annotations

from dataclasses import dataclass

DIFFRHYTHM_COMMIT = "28ad63c0f096fe2ee258bcabbcf081d5d9366afd"  # ASLP-lab/DiffRhythm HEAD, 2025-11-27

APACHE_DR = "Apache-2.0 (DiffRhythm code and DiT weights, per the upstream README)"
STABILITY = "Stability AI Community License (stable-audio-community; read it before commercial use)"
CC_BY_NC = "CC-BY-NC-4.0 (MuQ weights: non-commercial use only)"
WHISPER_LICENCE = "Apache-2.0 (Whisper weights, per the hub model card; OpenAI's Whisper code: MIT)"
G2P_LICENCE = ("Apache-2.0 (upstream repository); upstream's g2p folder comes from Amphion, whose source "
               "headers say MIT")


@dataclass(frozen=True)
class Source:
    kind: str  # "hf" (Hugging Face hub repo) or "github" (raw file of a GitHub repo at a commit)
    repo: str
    revision: str  # commit hash, or a branch name when not pinned
    pinned: bool
    aliases: tuple[str, ...] = ()  # other hub ids the same repo is cached under

    @property
    def label(self) -> str:
        rev = self.revision[:12] if self.pinned else f"{self.revision} (not pinned)"
        host = "huggingface.co" if self.kind == "hf" else "github.com"
        return f"{host}/{self.repo}@{rev}"

    def url(self, filename: str) -> str:
        if self.kind == "github":
            return f"https://raw.githubusercontent.com/{self.repo}/{self.revision}/{filename}"
        return f"https://huggingface.co/{self.repo}/resolve/{self.revision}/{filename}"


@dataclass(frozen=True)
class FileSpec:
    source: Source
    filename: str  # path inside the source
    size: int | None = None  # exact bytes when known (checked by list/verify)
    sha256: str | None = None
    git_sha1: str | None = None  # git blob id (GitHub files): sha1(b"blob <size>\0" + content)
    approx: str = ""  # size shown to the user when the exact one is unknown
    key: str = ""  # name within its model when base names clash (MuLan has three config.json)

    @property
    def basename(self) -> str:
        return self.filename.rsplit("/", 1)[-1]

    @property
    def id(self) -> str:
        return self.key or self.basename


@dataclass(frozen=True)
class ModelSpec:
    name: str
    title: str
    files: tuple[FileSpec, ...]
    licence: str
    default: bool = True  # part of what `studio models fetch/verify` handle without --only
    note: str = ""


def _hf(repo: str, revision: str = "main", aliases: tuple[str, ...] = ()) -> Source:
    return Source("hf", repo, revision, pinned=len(revision) == 40, aliases=aliases)


UPSTREAM = Source("github", "ASLP-lab/DiffRhythm", DIFFRHYTHM_COMMIT, pinned=True)
MULAN = _hf("OpenMuQ/MuQ-MuLan-large", "2e01c796b71dca71b45251384c04cd7b237c9020")
MUQ = _hf("OpenMuQ/MuQ-large-msd-iter", "0562a57814f6f8bbd9fdea0a25921a2fce1a841a")
XLMR = _hf("FacebookAI/xlm-roberta-base", "e73636d4f797dec63c3081bb6ed5c7b0bb3f2089", aliases=("xlm-roberta-base",))


WHISPER_FILES = ("config.json", "generation_config.json", "model.safetensors", "preprocessor_config.json",
                 "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
                 "added_tokens.json", "normalizer.json")


def _whisper(name: str, repo: str, revision: str, weights: str, title: str, note: str) -> ModelSpec:
    """A Whisper checkpoint in the hub layout; the worker loads the folder (device_worker.transcribe)."""
    source = _hf(repo, revision)
    files = tuple(FileSpec(source, f, approx=weights if f == "model.safetensors" else "< 3 MB") for f in WHISPER_FILES)
    return ModelSpec(name, title, files, WHISPER_LICENCE, default=False, note=note)


def _g2p(path: str, size: int | None, git_sha1: str, approx: str = "", sha256: str | None = None) -> FileSpec:
    return FileSpec(UPSTREAM, path, size=size, git_sha1=git_sha1, approx=approx, sha256=sha256)


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("diffrhythm-1.2", "DiffRhythm 1.2 base DiT (95 s songs)",
              (FileSpec(_hf("ASLP-lab/DiffRhythm-1_2"), "cfm_model.pt", approx="~2.2 GB"),), APACHE_DR),
    ModelSpec("diffrhythm-1.2-full", "DiffRhythm 1.2 full DiT (96-285 s songs)",
              (FileSpec(_hf("ASLP-lab/DiffRhythm-1_2-full"), "cfm_model.pt", approx="~2.2 GB"),), APACHE_DR),
    ModelSpec("diffrhythm-1.0-base", "DiffRhythm 1.0 base DiT (causal attention)",
              (FileSpec(_hf("ASLP-lab/DiffRhythm-base"), "cfm_model.pt", approx="~2.2 GB"),
               FileSpec(_hf("ASLP-lab/DiffRhythm-base"), "config.json", approx="246 B")), APACHE_DR, default=False),
    ModelSpec("diffrhythm-1.0-full", "DiffRhythm 1.0 full DiT (causal attention)",
              (FileSpec(_hf("ASLP-lab/DiffRhythm-full"), "cfm_model.pt", approx="~2.2 GB"),
               FileSpec(_hf("ASLP-lab/DiffRhythm-full"), "config.json", approx="~250 B")), APACHE_DR, default=False),
    ModelSpec("vae", "DiffRhythm VAE (Oobleck, TorchScript)",
              (FileSpec(_hf("ASLP-lab/DiffRhythm-vae"), "vae_model.pt", approx="~0.5-1 GB"),), STABILITY),
    ModelSpec("mulan", "MuQ-MuLan-large style encoder (+ MuQ config, XLM-R tokenizer)",
              (FileSpec(MULAN, "config.json", approx="~1 kB"),
               FileSpec(MULAN, "pytorch_model.bin", approx="~2.8 GB"),
               FileSpec(MUQ, "config.json", approx="~3 kB", key="muq/config.json"),
               FileSpec(XLMR, "config.json", approx="615 B", key="text/config.json"),
               FileSpec(XLMR, "tokenizer.json", approx="~9 MB", key="text/tokenizer.json")),
              CC_BY_NC + "; XLM-RoBERTa tokenizer: MIT",
              note="the MuQ-large-msd-iter and xlm-roberta-base weights are not needed: MuQ-MuLan's file holds "
                   "both towers"),
    ModelSpec("vocab", "lyrics phone vocabulary (g2p/g2p/vocab.json)",
              (FileSpec(UPSTREAM, "g2p/g2p/vocab.json", size=5802,
                        sha256="0f5c44e05f79df8ae4fd77d7772950436a8bacc83d134fdf0ae3c72412b5676a",
                        git_sha1="28d32aaf01881c6ff5449aaaf942d94b753a4e91"),), "Apache-2.0 (upstream repository)"),
    ModelSpec("chinese-lexicon", "Chinese word -> pinyin lexicon and pinyin -> bopomofo table (Chinese lyrics)",
              (_g2p("g2p/sources/chinese_lexicon.txt", 14779443, "7dc9e466816b0d4474c785b8326c3f5d1ae0d555",
                    sha256="a3a7685d1c3e68eb2fa304bfc63e90c90c3c1a1948839a5b1b507b2131b3e2fb"),
               _g2p("g2p/sources/pinyin_2_bpmf.txt", 5262, "af74dc687a547ed7822dacc77b7491924a8dcf1b",
                    sha256="dc8b048a20cf61d04b5a36bc6939db74095719b8099269a1269023ee3e6535b4")),
              G2P_LICENCE, note="without it Chinese lyrics are read by pypinyin, which differs from upstream"),
    ModelSpec("polyphone", "Chinese polyphone BERT (ONNX, run by onnxruntime on the CPU) and its tables",
              (_g2p("g2p/sources/g2p_chinese_model/poly_bert_model.onnx", 76583333,
                    "80c1cb3be59fea9723fc186ad6eea74194a93275",
                    sha256="8765d835ffdf9811c832d4dc7b6a552757aa8615c01d1184db716a50c20aebbc"),
               _g2p("g2p/sources/g2p_chinese_model/config.json", 18485, "5fb70ca91db27a4ad73b58a0c500a903be9bc1a9"),
               _g2p("g2p/sources/g2p_chinese_model/polychar.txt", 636, "819f6249a661134128c7a4bc72a1059ebe133d20"),
               _g2p("g2p/sources/g2p_chinese_model/polydict.json", 8210, "903fd018067b185c8cb8cd8a5b6cf07822512989"),
               _g2p("g2p/sources/g2p_chinese_model/polydict_r.json", 7428, "aabbe6257493eaee7d3f0b77f78f0cb006e89fb6"),
               _g2p("g2p/sources/g2p_chinese_model/vocab.txt", 109534, "66b6d20eebda7da8499e68ef9b1980990c0042cc")),
              G2P_LICENCE, note="without it polyphones (还, 得, 为, ...) in Chinese lyrics may be read differently "
                                "from upstream"),
    _whisper("whisper-large-v3-turbo", "openai/whisper-large-v3-turbo", "41f01f3fe87f28c78e2fbf8b568835947dd65ed9",
             "~1.6 GB", "Whisper large-v3-turbo (lyrics check; the default on a GPU)",
             "809 M parameters, 4 decoder layers: large-v3's hearing at a fraction of its decode time"),
    _whisper("whisper-small", "openai/whisper-small", "973afd24965f72e36ca33b3055d56a652f456b4d",
             "~0.97 GB", "Whisper small (lyrics check; the default on the CPU)",
             "244 M parameters (turbo: 809 M): small enough to hear takes beside the DiT on a CPU"),
    ModelSpec("negative-style", "negative style embedding (upstream infer/example/vocal.npy)",
              (FileSpec(UPSTREAM, "infer/example/vocal.npy", size=2176,
                        sha256="6cb7d74eb7a8eda12acb8247b21d373928301db8a8cb0db480d341799fed3ce5",
                        git_sha1="ae5aa3409006b60539867a82c90f40d68c3b98a2"),), "Apache-2.0 (upstream repository)"),
)

BY_NAME = {m.name: m for m in MODELS}


def get(name: str) -> ModelSpec:
    if name not in BY_NAME:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def chosen(names: list[str] | tuple[str, ...] | None = None) -> list[ModelSpec]:
    """The models named, or the default set."""
    if not names:
        return [m for m in MODELS if m.default]
    return [get(n) for n in names]
