"""engine.modelfiles + `studio models`: a tiny offline folder, a fake HF cache, offline fetch, resume."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

os.environ["HF_HUB_OFFLINE"] = "1"

from engine.modelfiles import ModelFileMissing, get, resolve, resolve_file  # noqa: E402
from engine.modelfiles.fetch import download_url, fetch_file  # noqa: E402
from studio.cli.model_files import models  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("STUDIO_MODELS_DIR", raising=False)
    return tmp_path


def put(root: Path, repo: str, filename: str, data: bytes) -> Path:
    p = root / repo / filename
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def fake_hf(cache: Path, repo: str, files: dict[str, bytes], commit: str = "c" * 40, ref: str = "main") -> None:
    """The real cache layout: blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>, refs/main."""
    root = cache / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / ref).write_text(commit)
    for name, data in files.items():
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = root / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))


def test_hand_laid_folder_and_missing_message(env, reference_dir):
    mdir = env / "models"
    with pytest.raises(ModelFileMissing) as err:
        resolve("vocab", models_dir=mdir)
    msg = str(err.value)
    assert "vocab.json" in msg and "studio models fetch --only vocab" in msg and "\n" not in msg
    put(mdir, "ASLP-lab/DiffRhythm", "g2p/g2p/vocab.json", (reference_dir / "g2p/g2p/vocab.json").read_bytes())
    assert resolve_file("vocab", "vocab.json", models_dir=mdir) == mdir / "ASLP-lab/DiffRhythm/g2p/g2p/vocab.json"
    put(mdir, "ASLP-lab/DiffRhythm", "infer/example/vocal.npy", b"x" * 10)  # wrong size
    with pytest.raises(ModelFileMissing, match=r"is damaged \(size 10 bytes, expected 2176\)"):
        resolve("negative-style", models_dir=mdir)


def test_list_and_verify_over_a_fake_hf_cache(env, reference_dir):
    fake_hf(env / "hf" / "hub", "ASLP-lab/DiffRhythm-vae", {"vae_model.pt": b"torchscript bytes"})
    runner = CliRunner()
    out = runner.invoke(models, ["list", "--only", "vae"])
    assert out.exit_code == 0, out.output
    assert "present" in out.output and "snapshots/" + "c" * 40 in out.output and "/blobs/" in out.output
    assert "Stability AI Community License" in out.output
    assert runner.invoke(models, ["verify", "--only", "vae"]).exit_code == 0
    # a dangling snapshot symlink (blob deleted) is corrupt, and verify fails naming the fetch command
    blob = next((env / "hf" / "hub" / "models--ASLP-lab--DiffRhythm-vae" / "blobs").iterdir())
    blob.unlink()
    out = runner.invoke(models, ["verify", "--only", "vae"])
    assert out.exit_code == 1 and "corrupt" in out.output and "studio models fetch --only vae" in out.output
    # HF_HUB_CACHE wins over HF_HOME
    os.environ["HF_HUB_CACHE"] = str(env / "other")
    try:
        fake_hf(env / "other", "ASLP-lab/DiffRhythm-vae", {"vae_model.pt": b"v"}, commit="d" * 40)
        assert resolve_file("vae", "vae_model.pt").parent.name == "d" * 40
    finally:
        del os.environ["HF_HUB_CACHE"]


def test_mulan_resolves_across_three_repos_including_the_legacy_alias(env):
    hub = env / "hf" / "hub"
    fake_hf(hub, "OpenMuQ/MuQ-MuLan-large", {"config.json": b"{}", "pytorch_model.bin": b"w"},
            commit="2e01c796b71dca71b45251384c04cd7b237c9020")
    fake_hf(hub, "OpenMuQ/MuQ-large-msd-iter", {"config.json": b"{}"}, commit="e" * 40)
    fake_hf(hub, "xlm-roberta-base", {"config.json": b"{}", "tokenizer.json": b"{}"})  # muq's id for it
    paths = resolve("mulan")
    assert set(paths) == {"config.json", "pytorch_model.bin", "muq/config.json", "text/config.json",
                          "text/tokenizer.json"}
    assert paths["text/tokenizer.json"].parent == paths["text/config.json"].parent
    assert paths["pytorch_model.bin"].name == "pytorch_model.bin"  # snapshot path keeps the name for loaders


def test_verify_checksums_and_exit_status(env, reference_dir):
    mdir = env / "models"
    put(mdir, "ASLP-lab/DiffRhythm", "g2p/g2p/vocab.json", (reference_dir / "g2p/g2p/vocab.json").read_bytes())
    runner = CliRunner()
    out = runner.invoke(models, ["verify", "--only", "vocab", "--models-dir", str(mdir)])
    assert out.exit_code == 0 and "checked" in out.output
    data = bytearray((reference_dir / "g2p/g2p/vocab.json").read_bytes())
    data[100] ^= 1  # same size, one bit flipped
    put(mdir, "ASLP-lab/DiffRhythm", "g2p/g2p/vocab.json", bytes(data))
    out = runner.invoke(models, ["verify", "--only", "vocab", "--models-dir", str(mdir)])
    assert out.exit_code == 1 and "sha256" in out.output
    assert runner.invoke(models, ["verify", "--only", "vocab", "--quick", "--models-dir", str(mdir)]).exit_code == 0
    assert runner.invoke(models, ["verify", "--only", "nope"]).exit_code == 2


def test_chinese_g2p_files_listed_verified_and_fetched(env, reference_dir, monkeypatch):
    models_dir = reference_dir.parent / "models-dir"  # upstream's g2p files byte for byte, as --models-dir lays them
    if not (models_dir / "ASLP-lab/DiffRhythm/g2p/sources/chinese_lexicon.txt").is_file():
        pytest.skip(f"upstream's Chinese g2p files not found under {models_dir}")
    names = {f.filename for m in ("chinese-lexicon", "polyphone") for f in get(m).files}
    assert {"g2p/sources/chinese_lexicon.txt", "g2p/sources/pinyin_2_bpmf.txt",
            "g2p/sources/g2p_chinese_model/poly_bert_model.onnx"} <= names
    assert all(f.size and f.git_sha1 for m in ("chinese-lexicon", "polyphone") for f in get(m).files)
    assert get("chinese-lexicon").default and get("polyphone").default  # fetched without --only
    runner = CliRunner()
    out = runner.invoke(models, ["verify", "--only", "chinese-lexicon", "--only", "polyphone",
                                 "--models-dir", str(models_dir)])
    assert out.exit_code == 0 and out.output.count("checked") == 8, out.output
    listed = runner.invoke(models, ["list", "--only", "polyphone", "--models-dir", str(models_dir)]).output
    assert "licence: Apache-2.0" in listed and "Amphion" in listed and "76.6 MB" in listed
    assert "missing" in runner.invoke(models, ["list", "--only", "chinese-lexicon"]).output  # nothing in HOME
    urls = []

    def fake_download(url, dest, **kw):
        urls.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes((models_dir / "ASLP-lab/DiffRhythm" / url.split("/" + get("vocab").files[0].source.revision
                                                                          + "/", 1)[1]).read_bytes())
        return dest

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    spec = get("chinese-lexicon").files[1]
    result = fetch_file("chinese-lexicon", spec, env / "fetched", url_download=fake_download, progress=False)
    assert result.action == "downloaded" and urls[0].endswith("/g2p/sources/pinyin_2_bpmf.txt")
    assert (env / "fetched/ASLP-lab/DiffRhythm/g2p/sources/pinyin_2_bpmf.txt").is_file()


def test_fetch_offline_says_what_it_cannot_do(env):
    out = CliRunner().invoke(models, ["fetch", "--only", "vae", "--only", "vocab"])
    assert out.exit_code == 1
    assert "offline" in out.output and "HF_HUB_OFFLINE" in out.output and "vae_model.pt" in out.output
    assert "2 file(s) could not be fetched" in out.output


def test_fetch_online_paths_without_network(env, monkeypatch, reference_dir):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    mdir = env / "models"
    seen = {}

    def fake_hf_download(repo_id, filename, revision, local_dir):
        seen.update(repo_id=repo_id, filename=filename, revision=revision)
        put(Path(local_dir), "", filename, b"weights")

    r = fetch_file("vae", get("vae").files[0], mdir, hf_download=fake_hf_download)
    assert r.action == "downloaded" and seen == {"repo_id": "ASLP-lab/DiffRhythm-vae", "filename": "vae_model.pt",
                                                 "revision": "main"}
    vocab = (reference_dir / "g2p/g2p/vocab.json").read_bytes()

    def fake_url(url, dest, expected_size, progress):
        assert url.endswith("/28ad63c0f096fe2ee258bcabbcf081d5d9366afd/g2p/g2p/vocab.json")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(vocab[:-1] + b"!")  # right size, wrong content

    r = fetch_file("vocab", get("vocab").files[0], mdir, url_download=fake_url)
    assert r.action == "failed" and "does not match" in r.message
    assert not (mdir / "ASLP-lab/DiffRhythm/g2p/g2p/vocab.json").exists()  # a bad download is not installed


class RangeHandler(BaseHTTPRequestHandler):
    data = b""

    def do_GET(self):  # noqa: N802
        start = 0
        if rng := self.headers.get("Range"):
            start = int(rng.split("=")[1].split("-")[0])
        body = self.data[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_download_resumes_with_range(tmp_path):
    RangeHandler.data = os.urandom(300_000)
    server = ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        dest = tmp_path / "f.bin"
        (tmp_path / "f.bin.part").write_bytes(RangeHandler.data[:123_456])  # an interrupted download
        download_url(f"http://127.0.0.1:{server.server_port}/f.bin", dest, progress=False)
        assert dest.read_bytes() == RangeHandler.data and not (tmp_path / "f.bin.part").exists()
    finally:
        server.shutdown()


def test_real_cli_subprocess_verify(env, reference_dir):
    mdir = env / "models"
    environ = {**os.environ, "HF_HUB_OFFLINE": "1", "STUDIO_MODELS_DIR": str(mdir)}
    cmd = [str(ROOT / ".venv" / "bin" / "studio"), "models", "verify", "--only", "negative-style"]
    if not Path(cmd[0]).exists():
        pytest.skip("the studio console script is not installed in .venv")
    missing = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "studio models fetch --only negative-style" in missing.stderr
    put(mdir, "ASLP-lab/DiffRhythm", "infer/example/vocal.npy", (reference_dir / "vocal.npy").read_bytes())
    ok = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "all model files present" in ok.stdout
